"""`/api/v1/schemas/` and `POST /api/v1/apply/`: the documents, rules and refusals of `manage.py apply`."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from core.audit import Actor
from core.models import AuditEvent
from gitops.models import ManagedObject
from tenants.models import Quota, Tenant
from tenants.tokens import create_token


def tenant(slug: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "gpucloud.io/v1alpha1", "kind": "Tenant", "metadata": {"name": slug}, "spec": spec}


def test_each_kind_has_a_json_schema_anyone_may_read(client):
    listing = client.get("/api/v1/schemas/").json()
    assert [k["kind"] for k in listing["results"]] == ["HostCluster", "RateCard", "Tenant"]

    schema = client.get("/api/v1/schemas/tenant/")

    assert schema.status_code == 200
    assert schema["Content-Type"].startswith("application/schema+json")
    assert schema.json()["properties"]["spec"]["properties"]["trustTier"]["enum"] == [
        "isolated",
        "standard",
        "trusted",
    ]
    missing = client.get("/api/v1/schemas/fleet/")
    assert missing.status_code == 404
    assert "kinds: HostCluster, RateCard, Tenant" in missing.json()["detail"]


def test_a_dry_run_shows_the_changes_and_writes_nothing(api, admin, demo_fleet):
    body = {
        "documents": [tenant("vision", quotas=[{"gpuClass": "h200-141gb", "guaranteed": 4}])],
        "dryRun": True,
    }

    answer = api(admin).post("/api/v1/apply/", body, format="json")

    assert answer.status_code == 200, answer.json()
    assert answer.json()["changes"] == [
        {
            "kind": "Tenant",
            "name": "vision",
            "action": "create",
            "fields": [
                {
                    "path": "quotas[h200-141gb]",
                    "before": None,
                    "after": {"guaranteed": 4, "burst": 0, "lendable": None, "weight": 1},
                }
            ],
        }
    ]
    assert not Tenant.objects.filter(slug="vision").exists()
    assert not ManagedObject.objects.exists()


def test_the_query_dry_run_of_the_other_writes_is_refused_on_apply_not_ignored(api, admin, demo_fleet):
    body = {"documents": [tenant("vision", quotas=[{"gpuClass": "h200-141gb", "guaranteed": 4}])]}

    answer = api(admin).post("/api/v1/apply/?dry_run=true", body, format="json")

    assert answer.status_code == 400
    assert answer.json()["errors"] == {"dry_run": ["not offered here"]}
    assert "POST /apply/ takes dryRun in its body" in answer.json()["detail"]
    assert not Tenant.objects.filter(slug="vision").exists()
    assert not ManagedObject.objects.exists()


def test_a_refused_document_is_a_problem_naming_document_field_and_reason(api, admin, demo_fleet):
    documents = [tenant("vision"), tenant("speech", trustTier="gold")]

    answer = api(admin).post("/api/v1/apply/", {"documents": documents}, format="json")

    assert answer.status_code == 400
    assert answer["Content-Type"] == "application/problem+json"
    problem = answer.json()
    assert problem["type"].endswith("/manifest-rejected")
    assert problem["problems"] == [
        {
            "file": "request[1]",
            "line": None,
            "field": "spec.trustTier",
            "reason": "'gold' is not one of ['isolated', 'standard', 'trusted']",
        }
    ]
    assert not Tenant.objects.filter(slug="vision").exists()


def test_an_owner_applies_to_their_tenant_what_the_services_let_them_and_no_more(api, people):
    alice = api(people["alice"])

    renamed = alice.post(
        "/api/v1/apply/", {"documents": [tenant("tenant-a", displayName="Team A")]}, format="json"
    )
    quota = alice.post(
        "/api/v1/apply/",
        {"documents": [tenant("tenant-a", quotas=[{"gpuClass": "h200-141gb", "guaranteed": 1}])]},
        format="json",
    )
    pruning = alice.post("/api/v1/apply/", {"documents": [], "prune": True}, format="json")

    assert renamed.status_code == 200
    assert Tenant.objects.get(slug="tenant-a").display_name == "Team A"
    assert AuditEvent.objects.get(action="tenant.update").actor_label == "alice (token test)"
    assert quota.status_code == 403
    assert "platform administrator" in quota.json()["detail"]
    assert pruning.status_code == 403
    assert not Quota.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_parallel_applies_over_http_never_guarantee_more_than_the_fleet_has(live_server, admin, demo_fleet):
    """64 H200 GPUs: eight applies of 12 each at once, each one tenant with its quota; five fit."""
    _, token = create_token(actor=Actor.system("test"), user=admin, name="ci", scope="admin")
    start = threading.Barrier(8)

    def post(index: int) -> int:
        body = {"documents": [tenant(f"team-{index}", quotas=[{"gpuClass": "h200-141gb", "guaranteed": 12}])]}
        start.wait()
        answer = requests.post(
            f"{live_server.url}/api/v1/apply/",
            json={**body, "source": f"team-{index}"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        return answer.status_code

    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(post, range(8)))

    assert sorted(codes) == [200] * 5 + [422] * 3
    # a refused apply left nothing: no tenant without its quota
    assert Tenant.objects.filter(slug__startswith="team-").count() == 5
    assert sum(Quota.objects.values_list("guaranteed", flat=True)) == 60
