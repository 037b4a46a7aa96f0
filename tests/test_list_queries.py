"""Every list route of the API runs the same number of queries whatever the number of rows (no N+1).

The routes come from the URL resolver (as in test_route_matrix), so a new list route is measured too. Each is
read by a platform administrator, who sees every row, with a page large enough to hold them all; then more of
everything is written (tenants with members, quotas, tokens, invoices, budgets, audit events; rate cards,
host clusters, usage), and each route must run exactly as many queries as before.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing.services import budgets, invoicing, rates
from billing.services.ingest import ingest_scrape
from billing.tests.conftest import MINI_FLEET, Row, exposition
from core.audit import Actor
from fleet import fleet_file
from fleet.models import GpuClass, HostCluster
from fleet.services import load_fleet
from tenants.models import Tenant
from tenants.services import lifecycle, members, quotas
from tenants.tokens import create_service_token, create_token
from tests.test_route_matrix import api_routes, methods, url_of

PAGE = "?limit=500"


def grow(admin_user, make_user, start: int, count: int) -> None:
    """`count` more of every kind of row a list route shows."""
    admin = Actor.of(admin_user)
    h200 = GpuClass.objects.get(name="h200-141gb")
    a100 = GpuClass.objects.get(name="a100-80gb")
    for n in range(start, start + count):
        tenant = lifecycle.create_tenant(actor=admin, slug=f"grow-{n}")
        user = make_user(f"user-{n}")
        members.add_member(actor=admin, tenant=tenant, username=user.username, role="viewer")
        quotas.set_quota(actor=admin, tenant=tenant, gpu_class=a100, guaranteed=0, burst=1)
        create_service_token(actor=admin, tenant=tenant, name=f"ci-{n}")
        create_token(actor=admin, user=admin_user, name=f"laptop-{n}")
        invoicing.draft_invoice(actor=admin, tenant=tenant, year=2026, month=11)
        budgets.set_budget(actor=admin, tenant=tenant, monthly_amount="100.00")
        rates.create_rate_card(
            actor=admin, effective_from=datetime(2026, 1, 1 + n, tzinfo=UTC), prices={"h200-141gb": "2.50"}
        )
        fleet = {**MINI_FLEET, "metadata": {"name": f"mini-{n}"}}
        cluster = load_fleet(actor=admin, fleet=fleet_file.parse(fleet), source="grow").host_cluster
        node = "h100-0"
        gpu = fleet_file.gpu_uuid(cluster.name, node, 0)
        ingest_scrape(cluster, node, datetime(2026, 11, 2, n, tzinfo=UTC), exposition(node, [Row(gpu)]))
    # The seed tenant's own children grow too: its members, quotas and service tokens are nested lists.
    seed = Tenant.objects.get(slug="seed")
    for n in range(start, start + count):
        members.add_member(actor=admin, tenant=seed, username=f"user-{n}", role="viewer")
        create_service_token(actor=admin, tenant=seed, name=f"seed-ci-{n}")
    quotas.set_quota(actor=admin, tenant=seed, gpu_class=h200 if start else a100, guaranteed=0, burst=1)


def queries_of_every_list_route(client) -> dict[str, int]:
    values = {"*": {"tenant_slug": "seed"}}
    counts = {}
    for route, pattern in api_routes():
        name = pattern.name or ""
        if not name.endswith("-list") or "GET" not in methods(pattern):
            continue
        url = url_of(route, name, values) + PAGE
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        counts[url] = len(queries)
    return counts


CAPACITY = "/api/v1/fleet/capacity/" + PAGE  # one placement model per host cluster, read together


def measure(admin, make_user, api) -> tuple[dict[str, int], dict[str, int]]:
    lifecycle.create_tenant(actor=Actor.of(admin), slug="seed")
    client = api(admin)
    grow(admin, make_user, 1, 2)
    client.get("/api/v1/tenants/")  # first request warms caches (content types, the catalog) once
    few = queries_of_every_list_route(client)
    grow(admin, make_user, 3, 5)
    return few, queries_of_every_list_route(client)


@pytest.mark.django_db
def test_every_list_route_runs_a_constant_number_of_queries_whatever_the_number_of_rows(
    admin, make_user, api, gpu_catalog, demo_fleet
):
    few, many = measure(admin, make_user, api)
    assert len(few) >= 15
    grew = {url: (few[url], many[url]) for url in few if few[url] != many[url]}
    assert not grew, f"queries per list route grew with the rows (before, after): {grew}"


@pytest.mark.django_db
def test_the_capacity_route_runs_a_constant_number_of_queries_whatever_the_number_of_host_clusters(
    admin, make_user, api, gpu_catalog, demo_fleet
):
    few, many = measure(admin, make_user, api)
    clusters = HostCluster.objects.filter(nodes__isnull=False).distinct().count()
    assert clusters == 1 + 7  # the demo fleet and one mini fleet per grown tenant: every one has a model
    assert few[CAPACITY] == many[CAPACITY]
