"""Every read route of the API answers what the published OpenAPI schema says, with data in every answer.

The routes come from Django's URL resolver (as in tests/test_route_matrix.py), so a GET route added later
is walked too, and one missing from the schema fails. The data covers each shape an answer can take: a tenant
with members, a quota, tokens, usage, a rate card, an invoice with lines and a budget; nodes that are healthy,
a node quarantined whole and a node with one quarantined GPU; health events, a GitOps source, metering sources
and scrapes. Each answer is validated against the schema the server publishes at /api/schema/, with
openapi-schema-validator (OpenAPI 3.1's dialect of JSON Schema, formats checked).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import pytest
import yaml
from openapi_schema_validator import OAS31Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from billing.models import CollectionSource, HealthCredit
from billing.services import budgets, invoicing, rates
from billing.services.ingest import ingest_scrape
from billing.tests.conftest import A100, H100, Row, exposition, gpu_uuid, mini, tenant_on  # noqa: F401
from core.audit import Actor
from fleet.models import GpuClass, Node, PendingWorkload
from gitops import services as gitops
from health.models import HealthEvent
from health.services import quarantines
from inference.keys import create_key
from inference.services import create_endpoint
from tenants.models import Tenant, TenantCluster
from tenants.services import members, quotas
from tenants.tokens import create_scim_token, create_service_token, create_token
from tests.test_route_matrix import api_routes, methods

SCHEMA_URI = "urn:gpucloud:openapi"
MAY = datetime(2026, 5, 10, 12, tzinfo=UTC)
# Lists that may be empty however much data there is. None today: every list shows at least one row.
MAY_BE_EMPTY: set[str] = set()


def template(route: str) -> str:
    """`api/v1/tenants/<slug:tenant_slug>/^quotas/(?P<gpu_class>[a-z0-9.-]+)/$` as the schema writes it."""
    path = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", route)
    path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", path)
    return "/" + path.replace("^", "").replace("$", "")


@pytest.fixture
def present(admin, mini, tenant_on, make_user, settings, api):  # noqa: F811
    """A platform with something in every answer; returns the path parameters of each route and a client."""
    settings.METER_MAX_GAP = 3600
    as_admin = Actor.of(admin)
    acme = tenant_on("acme")
    Tenant.objects.filter(pk=acme.pk).update(state=Tenant.State.READY)
    TenantCluster.objects.filter(tenant=acme).update(
        state=TenantCluster.State.READY, endpoint="https://acme.gpucloud.internal"
    )
    make_user("bob")
    members.add_member(actor=as_admin, tenant=acme, username="bob", role="viewer")
    quotas.set_quota(
        actor=as_admin, tenant=acme, gpu_class=GpuClass.objects.get(name="h100-80gb"), guaranteed=1
    )
    card = rates.create_rate_card(
        actor=as_admin, effective_from=MAY - timedelta(days=30), prices={"h100-80gb": "2.50"}
    )
    for hour in range(3):  # acme trains on two H100s for two hours
        rows = [Row(gpu_uuid("h100-0", i), index=i, pod="tenant-acme/train") for i in (0, 1)]
        ingest_scrape(mini, "h100-0", MAY + timedelta(hours=hour), exposition("h100-0", rows))
    CollectionSource.objects.create(
        host_cluster=mini, kind=CollectionSource.Kind.PROMETHEUS, url="http://prom:9090"
    )
    invoice = invoicing.draft_invoice(actor=as_admin, tenant=acme, year=2026, month=5)
    assert invoice.lines.exists()
    budgets.set_budget(actor=as_admin, tenant=acme, monthly_amount="1000.00")
    PendingWorkload.objects.create(  # one waiting workload, so the queue has an item to check
        tenant=acme,
        host_cluster_id=acme.cluster.host_cluster_id,
        namespace=acme.cluster.namespace,
        name="waits",
        queue="default",
        gpus=1,
        gpu_class="h100-80gb",
    )
    personal, _ = create_token(actor=as_admin, user=admin, name="laptop")
    service, _ = create_service_token(actor=as_admin, tenant=acme, name="ci")
    scim, _ = create_scim_token(actor=as_admin, name="okta")
    source = gitops.create_source(actor=as_admin, name="platform", url="https://git.example.com/platform.git")
    event = _quarantine(mini, acme)
    endpoint = create_endpoint(  # published, so every field of the answer has a value
        actor=as_admin, tenant=acme, name="chat", model_name="Qwen/Qwen3-8B", source_uri="hf://Qwen/Qwen3-8B",
        gpu_class=GpuClass.objects.get(name="h100-80gb"), min_replicas=0, context_length=32768,
        visibility="published", price_per_million_tokens="0.20", engine_args=["--dtype=bfloat16"],
    )  # fmt: skip
    inference_key, _ = create_key(  # every limit set, so every field of the answer has a value
        actor=as_admin, tenant=acme, name="app", endpoints=["chat"], rpm=60, tpm=100000, monthly_tokens=10**9,
        monthly_budget=Decimal("50"), expires_at=datetime(2099, 1, 1, tzinfo=UTC),
    )  # fmt: skip
    inference_key.last_used_at = inference_key.created_at
    inference_key.save(update_fields=["last_used_at"])
    values = {
        "*": {
            "slug": "acme",
            "tenant_slug": "acme",
            "tenant": "acme",
            "username": "bob",
            "gpu_class": "h100-80gb",
        },
        "token-detail": {"id": personal.public_id},
        "service-token-detail": {"id": service.public_id},
        "scim-token-detail": {"id": scim.public_id},
        "gpu-class-detail": {"name": "h100-80gb"},
        "host-cluster-detail": {"name": mini.name},
        "host-cluster-conformance": {"name": mini.name},
        "host-cluster-nodes": {"name": mini.name},
        "rate-card-detail": {"id": card.public_id},
        "invoice-detail": {"id": invoice.public_id},
        "invoice-csv": {"id": invoice.public_id},
        "invoice-focus": {"id": invoice.public_id},
        "schema-detail": {"kind": "tenant"},
        "health-event-detail": {"id": event.public_id},
        "gitops-source-detail": {"name": source.name},
        "inference-endpoint-detail": {"id": endpoint.public_id},
        "inference-key-detail": {"id": inference_key.public_id},
    }
    return values, api(admin)


def _quarantine(mini, acme) -> HealthEvent:  # noqa: F811
    """GPU 0 of h100-0 out (an XID 79 that cost acme an hour), a100-0 out whole; the other GPUs healthy."""
    h100, a100 = (
        Node.objects.get(host_cluster=mini, name="h100-0"),
        Node.objects.get(host_cluster=mini, name="a100-0"),
    )
    gpu = h100.gpus.get(index=0)
    moment = MAY + timedelta(hours=3)
    common = {
        "host_cluster": mini,
        "severity": "fatal",
        "action": "quarantine",
        "first_seen": moment,
        "last_seen": moment,
    }
    event = HealthEvent.objects.create(
        node=h100, gpu=gpu, subject="gpu:0", signal="xid", value="79", source="dcgm", **common
    )
    down = HealthEvent.objects.create(
        node=a100, subject="node", signal="condition", value="KernelDeadlock", source="kubernetes", **common
    )
    assert quarantines.quarantine(event, moment) is not None
    assert quarantines.quarantine(down, moment) is not None
    HealthCredit.objects.create(
        tenant=acme, event=event, host_cluster=mini, node=h100.name, gpu_uuid=gpu.uuid, device=gpu.uuid,
        namespace="tenant-acme", pod="train", gpu_class="h100-80gb", lost_from=moment,
        lost_until=moment + timedelta(hours=1), gpu_us=3600 * 10**6,
    )  # fmt: skip
    return event


@pytest.fixture
def published(client, admin) -> dict[str, Any]:
    client.force_login(admin)
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    schema: dict[str, Any] = response.json()
    return schema


def url_for(route: str, name: str, values: dict[str, dict[str, str]]) -> str:
    path = template(route)
    for key in re.findall(r"\{(\w+)\}", path):
        value = values.get(name, {}).get(key) or values["*"].get(key)
        assert value, f"{name}: no value for the path parameter {key}: add one to the fixture"
        path = path.replace("{" + key + "}", quote(value))
    return path


def query_for(operation: dict[str, Any]) -> str:
    """Values for the query parameters the operation requires (only the month of the exports today)."""
    needed = [p["name"] for p in operation.get("parameters", []) if p["in"] == "query" and p.get("required")]
    known = {"month": "2026-05"}
    missing = set(needed) - set(known)
    assert not missing, f"{operation['operationId']}: no value for the required query parameters {missing}"
    return "&".join(f"{name}={known[name]}" for name in needed)


def validator(document: dict[str, Any], pointer: str) -> OAS31Validator:
    registry = Registry().with_resource(SCHEMA_URI, DRAFT202012.create_resource(document))
    return OAS31Validator(
        {"$ref": f"{SCHEMA_URI}#{pointer}"}, registry=registry, format_checker=OAS31Validator.FORMAT_CHECKER
    )


def escape(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1")


def test_every_read_route_answers_as_the_published_schema_says_with_data_in_it(present, published):
    values, client = present
    problems, walked = [], 0
    for route, pattern in api_routes():
        if "GET" not in methods(pattern):
            continue
        path = template(route)
        operation = published["paths"].get(path, {}).get("get")
        if operation is None:
            problems.append(f"GET {path} is served but not in the schema")
            continue
        name = pattern.name or route
        query = query_for(operation)
        url = url_for(route, name, values) + (f"?{query}" if query else "")
        response = client.get(url)
        walked += 1
        problems += check(published, path, operation, url, response, name)
    assert walked >= 39
    assert not problems, "\n".join(problems)


def check(
    document: dict[str, Any], path: str, operation: dict[str, Any], url: str, response: Any, name: str
) -> list[str]:
    """What is wrong with one answer: a status or a media type the schema does not give, a body that does not
    validate, or an empty list."""
    if response.status_code != 200:
        return [f"GET {url}: {response.status_code} {getattr(response, 'content', b'')[:300]!r}"]
    media = response["Content-Type"].split(";")[0]
    content = operation["responses"]["200"].get("content", {})
    if media not in content:
        return [f"GET {url}: {media}, the schema gives {sorted(content)}"]
    if media in ("text/csv", "application/yaml"):
        body = b"".join(response.streaming_content) if response.streaming else response.content
        if media == "application/yaml":
            assert yaml.safe_load(body), url
        return [] if body.strip() else [f"GET {url}: an empty {media} document"]
    body = response.json()
    pointer = "/".join(["/paths", escape(path), "get/responses/200/content", escape(media), "schema"])
    errors = [
        f"GET {url}: {'/'.join(str(p) for p in e.absolute_path)}: {e.message}"
        for e in validator(document, pointer).iter_errors(body)
    ]
    if isinstance(body, dict) and body.get("results") == [] and name not in MAY_BE_EMPTY:
        errors.append(f"GET {url}: an empty list, so its items were not checked: add data to the fixture")
    return errors


def test_a_healthy_nodes_quarantine_is_null_and_the_schema_allows_it(present, published):
    """The issue's case, by itself: FleetNode.quarantine and _FleetGpu.quarantine are null when healthy."""
    _, client = present
    nodes = client.get("/api/v1/host-clusters/mini/nodes/").json()["results"]
    by_name = {n["name"]: n for n in nodes}
    assert by_name["a100-0"]["quarantine"] is not None
    assert by_name["h100-0"]["quarantine"] is None
    assert by_name["h100-0"]["gpus"][0]["quarantine"] is not None
    assert by_name["h100-0"]["gpus"][1]["quarantine"] is None
    node = validator(published, "/components/schemas/FleetNode")
    for row in nodes:
        assert not list(node.iter_errors(row)), row["name"]
