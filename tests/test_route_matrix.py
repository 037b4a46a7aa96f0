"""Every route of the API router × alice (owner of A), bob (viewer of A), charlie (owner of B), anonymous.

The routes come from Django's URL resolver, so a route added without a line in MATRIX fails this test. Each
request runs in a savepoint that is rolled back, so every cell starts from the same state. Objects in URLs
belong to tenant A: charlie must get 404 for all of them (not 403: he may not learn they exist).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from billing.models import HealthCredit
from billing.services import budgets, invoicing, rates
from core.audit import Actor
from fleet.models import Gpu, GpuClass, HostCluster
from gitops import services as gitops
from health.models import HealthEvent
from inference.keys import create_key
from inference.services import create_endpoint
from tenants.models import Tenant, TenantCluster
from tenants.services import quotas
from tenants.tokens import create_scim_token, create_service_token, create_token

PEOPLE = ("alice", "bob", "charlie", "anonymous")

# (route name, method): expected status for alice, bob, charlie, anonymous.
MATRIX: dict[tuple[str, str], tuple[int, int, int, int]] = {
    ("tenant-list", "GET"): (200, 200, 200, 401),
    ("tenant-list", "POST"): (403, 403, 403, 401),
    ("tenant-detail", "GET"): (200, 200, 404, 401),
    ("tenant-detail", "PATCH"): (200, 403, 404, 401),
    ("tenant-detail", "DELETE"): (202, 403, 404, 401),
    ("tenant-suspend", "POST"): (202, 403, 404, 401),
    ("tenant-wake", "POST"): (202, 202, 404, 401),  # the team wakes its idle cluster
    ("tenant-resume", "POST"): (409, 403, 404, 401),  # alice may, but a ready tenant cannot resume
    ("tenant-kubeconfig", "GET"): (200, 200, 404, 401),  # viewers get their own (view) kubeconfig
    ("tenant-kubeconfig-admin", "GET"): (200, 403, 404, 401),  # break-glass: owners only
    ("tenant-standing", "GET"): (200, 200, 404, 401),  # every role; its cost fields only with billing.view
    ("gpu-class-list", "GET"): (200, 200, 200, 401),
    ("gpu-class-detail", "GET"): (200, 200, 200, 401),
    ("host-cluster-list", "GET"): (200, 200, 200, 401),
    ("host-cluster-list", "POST"): (403, 403, 403, 401),  # platform administrators register clusters
    ("host-cluster-detail", "GET"): (200, 200, 200, 401),
    ("host-cluster-conformance", "GET"): (200, 200, 200, 401),
    # changing a host cluster, cordoning, draining or deleting it: platform administrators only
    ("host-cluster-detail", "PATCH"): (403, 403, 403, 401),
    ("host-cluster-detail", "DELETE"): (403, 403, 403, 401),
    ("host-cluster-cordon", "POST"): (403, 403, 403, 401),
    ("host-cluster-uncordon", "POST"): (403, 403, 403, 401),
    ("host-cluster-drain", "POST"): (403, 403, 403, 401),
    ("host-cluster-retire", "POST"): (403, 403, 403, 401),
    ("host-cluster-unretire", "POST"): (403, 403, 403, 401),
    ("capacity-list", "GET"): (200, 200, 200, 401),
    ("what-if-list", "POST"): (200, 200, 404, 401),  # asking about tenant A's gang: charlie may not
    # A member whose role may not read something is told so (403 naming the roles), as the portal tells them;
    # a list across tenants holds what the caller may read (charlie: B's), another tenant's object is a 404.
    ("audit-event-list", "GET"): (200, 403, 200, 401),  # bob, a viewer, may read no audit log anywhere
    ("audit-event-export", "GET"): (200, 403, 200, 401),
    ("token-list", "GET"): (200, 200, 200, 401),
    ("token-list", "POST"): (201, 201, 201, 401),
    ("token-detail", "GET"): (200, 404, 404, 401),  # alice's own token
    ("token-detail", "DELETE"): (200, 404, 404, 401),
    # identity providers' SCIM tokens: platform administrators only, whatever role someone has in a tenant
    ("scim-token-list", "GET"): (403, 403, 403, 401),
    ("scim-token-list", "POST"): (403, 403, 403, 401),
    ("scim-token-detail", "GET"): (403, 403, 403, 401),
    ("scim-token-detail", "DELETE"): (403, 403, 403, 401),
    ("member-list", "GET"): (200, 200, 404, 401),
    ("member-list", "POST"): (201, 403, 404, 401),
    ("member-detail", "GET"): (200, 200, 404, 401),
    ("member-detail", "PATCH"): (200, 403, 404, 401),
    ("member-detail", "DELETE"): (204, 403, 404, 401),
    ("quota-list", "GET"): (200, 200, 404, 401),
    ("quota-list", "POST"): (403, 403, 404, 401),
    ("quota-detail", "GET"): (200, 200, 404, 401),
    ("quota-detail", "PUT"): (403, 403, 404, 401),
    ("quota-detail", "DELETE"): (403, 403, 404, 401),
    ("service-token-list", "GET"): (200, 403, 404, 401),
    ("service-token-list", "POST"): (201, 403, 404, 401),
    ("service-token-detail", "GET"): (200, 403, 404, 401),
    ("service-token-detail", "DELETE"): (200, 403, 404, 401),
    # money: owners, admins and billing viewers of the tenant; others do not see it at all
    ("usage-list", "GET"): (200, 403, 200, 401),  # scoped: charlie gets no rows of A
    ("rate-card-list", "GET"): (200, 200, 200, 401),  # prices are public to everyone signed in
    ("rate-card-list", "POST"): (403, 403, 403, 401),
    ("rate-card-detail", "GET"): (200, 200, 200, 401),
    ("rate-card-detail", "DELETE"): (403, 403, 403, 401),  # platform administrators withdraw cards
    ("rate-card-retire", "POST"): (403, 403, 403, 401),
    ("invoice-list", "GET"): (200, 403, 200, 401),  # scoped
    ("invoice-list", "POST"): (201, 403, 404, 401),
    ("invoice-export", "GET"): (400, 400, 400, 401),  # without ?month= it is a bad request to everyone
    ("invoice-detail", "GET"): (200, 403, 404, 401),
    ("invoice-csv", "GET"): (200, 403, 404, 401),
    ("invoice-focus", "GET"): (200, 403, 404, 401),
    ("invoice-issue", "POST"): (403, 403, 404, 401),  # platform administrators issue invoices
    ("budget-list", "GET"): (200, 403, 200, 401),
    ("budget-list", "POST"): (201, 403, 404, 401),
    ("budget-detail", "GET"): (200, 403, 404, 401),
    ("metering-source-list", "GET"): (403, 403, 403, 401),  # platform administrators only
    ("metering-scrape-list", "GET"): (403, 403, 403, 401),
    # manifests: schemas are public documentation; apply goes through the services, so each role may do
    # exactly what it may do through the other endpoints (charlie does not see tenant A: to him the manifest
    # asks to create it, which needs a platform administrator)
    ("schema-list", "GET"): (200, 200, 200, 200),
    ("schema-detail", "GET"): (200, 200, 200, 200),
    ("apply-list", "POST"): (200, 403, 403, 401),
    # GitOps sources apply to every tenant: platform administrators only; the webhook is signed, not signed in
    ("gitops-source-list", "GET"): (403, 403, 403, 401),
    ("gitops-source-list", "POST"): (403, 403, 403, 401),
    ("gitops-source-detail", "GET"): (403, 403, 403, 401),
    ("gitops-source-detail", "PATCH"): (403, 403, 403, 401),
    ("gitops-source-detail", "DELETE"): (403, 403, 403, 401),
    ("gitops-source-sync", "POST"): (403, 403, 403, 401),
    ("gitops-source-webhook", "POST"): (404, 404, 404, 404),  # unsigned: as a source that does not exist
    # health: every event to platform administrators; to a tenant's team the events that cost it time
    ("health-event-list", "GET"): (200, 200, 200, 401),  # scoped: charlie sees none of A's
    ("health-event-detail", "GET"): (200, 200, 404, 401),  # an event tenant A was credited for
    ("host-cluster-nodes", "GET"): (403, 403, 403, 401),  # the fleet's nodes: platform administrators
    ("host-cluster-release", "POST"): (403, 403, 403, 401),
    # where my job stands: every role of the tenant reads its queue and asks about feasibility
    ("tenant-queue", "GET"): (200, 200, 404, 401),
    ("tenant-feasibility", "POST"): (200, 200, 404, 401),
    # inference endpoints: the team reads them, members and managers run them (bob is a viewer)
    ("inference-endpoint-list", "GET"): (200, 200, 404, 401),
    ("inference-endpoint-list", "POST"): (201, 403, 404, 401),
    ("inference-endpoint-detail", "GET"): (200, 200, 404, 401),
    ("inference-endpoint-detail", "PUT"): (200, 403, 404, 401),
    ("inference-endpoint-detail", "PATCH"): (200, 403, 404, 401),
    ("inference-endpoint-detail", "DELETE"): (204, 403, 404, 401),
    # the gateway's virtual keys: the team lists them (never their secrets), members make and revoke them
    ("inference-key-list", "GET"): (200, 200, 404, 401),
    ("inference-key-list", "POST"): (201, 403, 404, 401),
    ("inference-key-detail", "GET"): (200, 200, 404, 401),
    ("inference-key-detail", "DELETE"): (200, 403, 404, 401),
}

ENDPOINT = {
    "model_name": "Qwen/Qwen3-8B",
    "source_uri": "hf://Qwen/Qwen3-8B",
    "gpu_class": "h200-141gb",
    "min_replicas": 0,
}
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("tenant-list", "POST"): {"slug": "newcomer"},
    ("tenant-detail", "PATCH"): {"display_name": "Renamed"},
    ("what-if-list", "POST"): {"gang": {"pods": 2, "gpus_per_pod": 1, "tenant": "tenant-a"}},
    ("tenant-feasibility", "POST"): {"gpu_class": "h200-141gb", "count": 1, "hours": 2},
    ("host-cluster-list", "POST"): {"name": "gpu-east", "kubeconfig": "apiVersion: v1", "scheduler": "kueue"},
    ("token-list", "POST"): {"name": "laptop", "scope": "read"},
    ("scim-token-list", "POST"): {"name": "okta"},
    ("member-list", "POST"): {"username": "charlie", "role": "viewer"},
    ("member-detail", "PATCH"): {"role": "member"},
    ("quota-list", "POST"): {"gpu_class": "a100-80gb", "guaranteed": 1},
    ("quota-detail", "PUT"): {"guaranteed": 2},
    ("service-token-list", "POST"): {"name": "terraform", "scope": "write"},
    ("rate-card-list", "POST"): {"effective_from": "2026-11-01T00:00:00Z", "prices": {"h200-141gb": "3.10"}},
    ("invoice-list", "POST"): {"tenant": "tenant-a", "month": "2026-11"},
    ("budget-list", "POST"): {"tenant": "tenant-a", "monthly_amount": "5000.00", "currency": "USD"},
    ("apply-list", "POST"): {
        "dryRun": True,
        "documents": [
            {
                "apiVersion": "gpucloud.io/v1alpha1",
                "kind": "Tenant",
                "metadata": {"name": "tenant-a"},
                "spec": {"displayName": "Team A"},
            }
        ],
    },
    ("gitops-source-list", "POST"): {"name": "other", "url": "https://git.example.com/other.git"},
    ("gitops-source-detail", "PATCH"): {"branch": "release"},
    ("inference-endpoint-list", "POST"): {"name": "chat", **ENDPOINT},
    ("inference-endpoint-detail", "PUT"): {**ENDPOINT, "max_replicas": 1},
    ("inference-endpoint-detail", "PATCH"): {"max_replicas": 1, "desired": "running"},
    ("inference-key-list", "POST"): {"name": "app", "rpm": 60, "endpoints": ["embed"]},
}


def api_routes() -> list[tuple[str, URLPattern]]:
    def walk(patterns: list[URLPattern | URLResolver], prefix: str = "") -> list[tuple[str, URLPattern]]:
        found = []
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                found += walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif getattr(pattern.callback, "actions", None):
                found.append((prefix + str(pattern.pattern), pattern))
        return found

    return [(route, p) for route, p in walk(get_resolver().url_patterns) if route.startswith("api/v1/")]


def methods(pattern: URLPattern) -> list[str]:
    """The methods a route maps to actions; HEAD is GET's twin (DRF adds it on the first request)."""
    actions = pattern.callback.actions  # type: ignore[attr-defined]
    return sorted(m.upper() for m in actions if m != "head")


def url_of(route: str, name: str, values: dict[str, dict[str, str]]) -> str:
    names = [a or b for a, b in re.findall(r"\(\?P<(\w+)>|<(?:\w+:)?(\w+)>", route)]
    kwargs = {key: values.get(name, {}).get(key) or values["*"][key] for key in names}
    return reverse(name, kwargs=kwargs)


@pytest.fixture
def world(people, api, demo_fleet):
    admin = Actor.of(people["admin"])
    Tenant.objects.filter(pk=people["a"].pk).update(state=Tenant.State.READY)
    TenantCluster.objects.filter(tenant=people["a"]).update(
        state=TenantCluster.State.READY, endpoint="https://tenant-a.gpucloud.internal"
    )
    quotas.set_quota(
        actor=admin, tenant=people["a"], gpu_class=GpuClass.objects.get(name="h200-141gb"), guaranteed=1
    )
    card = rates.create_rate_card(
        actor=admin, effective_from=datetime(2026, 11, 1, tzinfo=UTC), prices={"h200-141gb": "2.50"}
    )
    invoice = invoicing.draft_invoice(actor=admin, tenant=people["a"], year=2026, month=11)
    budgets.set_budget(actor=admin, tenant=people["a"], monthly_amount="1000.00")
    personal, _ = create_token(actor=Actor.of(people["alice"]), user=people["alice"], name="alice's laptop")
    service, _ = create_service_token(actor=admin, tenant=people["a"], name="gitops")
    scim, _ = create_scim_token(actor=admin, name="okta")
    source = gitops.create_source(actor=admin, name="platform", url="https://git.example.com/platform.git")
    event = _credited_event(people["a"], demo_fleet)
    endpoint = create_endpoint(  # stopped: it holds none of the quota, so each write in the matrix fits
        actor=admin, tenant=people["a"], name="embed", model_name="BAAI/bge-m3", source_uri="hf://BAAI/bge-m3",
        gpu_class=GpuClass.objects.get(name="h200-141gb"), desired="stopped",
    )  # fmt: skip
    inference_key, _ = create_key(actor=admin, tenant=people["a"], name="app")
    values = {
        "*": {"slug": "tenant-a", "tenant_slug": "tenant-a", "username": "bob", "gpu_class": "h200-141gb"},
        "token-detail": {"id": personal.public_id},
        "service-token-detail": {"id": service.public_id},
        "scim-token-detail": {"id": scim.public_id},
        "gpu-class-detail": {"name": "h200-141gb"},
        "host-cluster-detail": {"name": demo_fleet.name},
        "host-cluster-conformance": {"name": demo_fleet.name},
        "host-cluster-cordon": {"name": demo_fleet.name},
        "host-cluster-uncordon": {"name": demo_fleet.name},
        "host-cluster-drain": {"name": demo_fleet.name},
        "host-cluster-retire": {"name": demo_fleet.name},
        "host-cluster-unretire": {"name": demo_fleet.name},
        "rate-card-detail": {"id": card.public_id},
        "rate-card-retire": {"id": card.public_id},
        "invoice-detail": {"id": invoice.public_id},
        "invoice-csv": {"id": invoice.public_id},
        "invoice-focus": {"id": invoice.public_id},
        "invoice-issue": {"id": invoice.public_id},
        "budget-detail": {"tenant": "tenant-a"},
        "schema-detail": {"kind": "tenant"},
        "health-event-detail": {"id": event.public_id},
        "host-cluster-nodes": {"name": demo_fleet.name},
        "host-cluster-release": {"name": demo_fleet.name, "node": event.node.name},
        "inference-endpoint-detail": {"id": endpoint.public_id},
        "inference-key-detail": {"id": inference_key.public_id},
        **{f"gitops-source-{route}": {"name": source.name} for route in ("detail", "sync", "webhook")},
    }
    clients = {name: api(people.get(name)) for name in PEOPLE}
    return values, clients


def _credited_event(tenant: Tenant, host_cluster: HostCluster) -> HealthEvent:
    """An XID 79 on a GPU of the fleet that cost the tenant an hour."""
    gpu = Gpu.objects.filter(node__host_cluster=host_cluster).select_related("node").first()
    assert gpu is not None
    moment = datetime(2026, 11, 2, tzinfo=UTC)
    event = HealthEvent.objects.create(
        host_cluster=host_cluster, node=gpu.node, gpu=gpu, subject=f"gpu:{gpu.index}", signal="xid",
        value="79", severity="fatal", action="quarantine", source="dcgm", first_seen=moment, last_seen=moment,
    )  # fmt: skip
    HealthCredit.objects.create(
        tenant=tenant, event=event, host_cluster=host_cluster, node=gpu.node.name, gpu_uuid=gpu.uuid,
        device=gpu.uuid, namespace=f"tenant-{tenant.slug}", pod="train", gpu_class="h200-141gb",
        lost_from=moment, lost_until=moment + timedelta(hours=1), gpu_us=3600 * 10**6,
    )  # fmt: skip
    return event


def test_every_api_route_answers_each_role_exactly_as_the_matrix_says(world):
    values, clients = world
    unlisted, wrong = [], []
    for route, pattern in api_routes():
        for method in methods(pattern):
            key = (pattern.name or route, method)
            if key not in MATRIX:
                unlisted.append(key)
                continue
            url = url_of(route, key[0], values)
            for person, expected in zip(PEOPLE, MATRIX[key], strict=True):
                savepoint = transaction.savepoint()
                try:
                    response = clients[person].generic(
                        method, url, data=_json(BODIES.get(key)), content_type="application/json"
                    )
                finally:
                    transaction.savepoint_rollback(savepoint)
                if response.status_code != expected:
                    wrong.append(f"{method} {url} as {person}: {response.status_code}, expected {expected}")
    assert not unlisted, f"routes missing from MATRIX (add them with each role's answer): {unlisted}"
    assert not wrong, "\n".join(wrong)
    listed = {(p.name, m) for _, p in api_routes() for m in methods(p)}
    assert set(MATRIX) <= listed, f"MATRIX names routes that no longer exist: {set(MATRIX) - listed}"


def _json(body: dict[str, Any] | None) -> str:
    return json.dumps(body) if body is not None else ""


def test_bob_is_told_who_reads_the_audit_log_and_charlie_sees_none_of_tenant_as_events(world, people):
    _, clients = world
    alice_sees = clients["alice"].get("/api/v1/audit-events/?tenant=tenant-a").json()
    assert alice_sees["count"] > 0
    bob = clients["bob"].get("/api/v1/audit-events/?tenant=tenant-a")
    assert bob.status_code == 403
    assert bob.json()["detail"] == "audit.view needs one of these roles in tenant tenant-a: admin, owner"
    assert clients["charlie"].get("/api/v1/audit-events/?tenant=tenant-a").status_code == 404
    assert clients["charlie"].get("/api/v1/audit-events/?tenant=no-such-tenant").status_code == 404
    export = clients["charlie"].get("/api/v1/audit-events/export/")
    assert b"tenant-a" not in b"".join(export.streaming_content)


# SCIM (/scim/v2/, outside the API router): one path of each kind × every caller. Only a SCIM token gets in;
# a tenant owner's token, and a platform administrator's own, are refused (403); no token is 401.
SCIM_PATHS = ("ServiceProviderConfig", "ResourceTypes", "Schemas", "Users", "Groups", "Users/scu_0", "Void")
SCIM_CALLERS = ("alice", "bob", "charlie", "admin", "anonymous", "scim")


def test_only_a_scim_token_opens_scim_and_it_opens_nothing_else(people, api):
    _, scim_token = create_scim_token(actor=Actor.of(people["admin"]), name="okta")
    clients = {name: api(people.get(name)) for name in SCIM_CALLERS}
    clients["scim"].credentials(HTTP_AUTHORIZATION=f"Bearer {scim_token}")
    expected = {"Users": 200, "Groups": 200, "Users/scu_0": 404, "Void": 404}
    wrong = []
    for path in SCIM_PATHS:
        for caller, client in clients.items():
            status = client.get(f"/scim/v2/{path}").status_code
            want = 200 if path == "ServiceProviderConfig" else None  # public, as RFC 7644 §4 has it
            want = want or {"anonymous": 401, "scim": expected.get(path, 200)}.get(caller, 403)
            if status != want:
                wrong.append(f"GET /scim/v2/{path} as {caller}: {status}, expected {want}")
    assert not wrong, "\n".join(wrong)
    plain = {route.replace("^", "").replace("$", "") for route, _ in api_routes() if "<" not in route}
    for path in sorted(p for p in plain if "(?P" not in p):
        status = clients["scim"].get("/" + path).status_code
        assert status in (401, 405), f"GET /{path} with a SCIM token: {status}"
