"""Twenty administrators create the same tenant at once, over real HTTP against PostgreSQL: one wins."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import requests

from tenants.models import Tenant, TenantCluster
from tenants.tokens import create_token
from tests.fixtures import SYSTEM

PARALLEL = 20


def test_twenty_concurrent_creates_of_one_slug_give_one_201_and_nineteen_409(
    transactional_db, live_server, admin, demo_fleet
):
    _, token = create_token(actor=SYSTEM, user=admin, name="race", scope="admin")
    start = threading.Barrier(PARALLEL)

    def create(_: int) -> requests.Response:
        with requests.Session() as session:
            session.headers["Authorization"] = f"Bearer {token}"
            start.wait()  # every request leaves at once, so the check-then-insert really races
            return session.post(f"{live_server.url}/api/v1/tenants/", json={"slug": "vision"}, timeout=60)

    with ThreadPoolExecutor(PARALLEL) as pool:
        responses = list(pool.map(create, range(PARALLEL)))

    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201] + [409] * (PARALLEL - 1)
    for refusal in (r for r in responses if r.status_code == 409):
        assert refusal.headers["Content-Type"] == "application/problem+json"
        assert refusal.json()["type"] == "/problems/conflict"
        assert "slug" in refusal.json()["errors"]
    assert Tenant.objects.filter(slug="vision").count() == 1
    assert TenantCluster.objects.filter(tenant__slug="vision").count() == 1
