"""Platform administrators' page of GitOps sources (`/gitops/`): each source's state, the revision applied,
the last error with file and line, the drift its last sync restored, what it manages; and *Sync now*."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from gitops import services
from gitops.models import GitSource
from gitops.selectors import sources_with_objects
from portal.views.fleet import require_platform_admin


@login_required
def sources(request: HttpRequest) -> HttpResponse:
    require_platform_admin(request, "the GitOps sources page")
    rows = sources_with_objects()
    return render(request, "portal/admin/gitops.html", {"nav": "gitops", "sources": rows})


@login_required
@require_POST
def sync(request: HttpRequest, name: str) -> HttpResponse:
    """Queue a sync now (the worker runs it); the page shows its outcome once it has run."""
    require_platform_admin(request, "syncing a GitOps source")
    source = get_object_or_404(GitSource, name=name)
    services.request_sync(source)
    messages.success(request, f"A sync of {source.name} is queued; reload to see its outcome.")
    return redirect("portal:gitops-sources")
