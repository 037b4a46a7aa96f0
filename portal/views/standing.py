"""`/tenants/<slug>/standing/`: where the tenant stands now, for every role of it: per GPU class guaranteed,
burst, in use, borrowed and lent; its running pods' GPU utilisation, idle first; cost for roles that may.

The figures are `billing.standing`'s, as the API (`GET /api/v1/tenants/{slug}/standing/`) gives them.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from billing.standing import standing_of
from portal.bars import bar
from portal.scoping import allowed, tenant_for


@login_required
def standing(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = tenant_for(request, slug, "usage.view")
    can = allowed(request, tenant, "billing.view")
    now = standing_of(tenant, with_cost=can["billing_view"])
    context = {
        "tenant": tenant,
        "tab": "standing",
        "standing": now,
        "rows": [(c, bar(c.in_use, c.guaranteed, c.burst)) for c in now.classes],
        "can": can,
    }
    return render(request, "portal/tenant/standing.html", context)
