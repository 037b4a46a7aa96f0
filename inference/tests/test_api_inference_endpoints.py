"""/api/v1/tenants/{slug}/inference-endpoints/: CRUD through the services, 400s naming the field, 404 for
another tenant's endpoint (alice owns tenant-a, bob is a viewer there, charlie owns tenant-b)."""

import pytest

from core.audit import Actor
from core.models import AuditEvent
from fleet.models import GpuClass
from inference.models import InferenceEndpoint
from tenants.services import quotas

BODY = {
    "name": "chat",
    "model_name": "meta-llama/Llama-3.1-8B-Instruct",
    "source_uri": "hf://meta-llama/Llama-3.1-8B-Instruct",
    "gpu_class": "h200-141gb",
    "gpus_per_replica": 2,
    "min_replicas": 1,
    "max_replicas": 2,
    "context_length": 8192,
    "engine_args": ["--enable-prefix-caching"],
}
URL = "/api/v1/tenants/tenant-a/inference-endpoints/"


@pytest.fixture
def world(people, api):
    """Tenant A guaranteed 2 H200s with 2 of burst."""
    quotas.set_quota(
        actor=Actor.of(people["admin"]),
        tenant=people["a"],
        gpu_class=GpuClass.objects.get(name="h200-141gb"),
        guaranteed=2,
        burst=2,
    )
    return {name: api(people[name]) for name in ("alice", "bob", "charlie")}


def test_an_owner_creates_reads_changes_and_deletes_an_endpoint(world):
    alice = world["alice"]
    created = alice.post(URL, BODY, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["id"].startswith("ie_")
    assert body["tenant"] == "tenant-a"
    assert body["served_model_name"] == BODY["model_name"]
    assert body["status"] == {"replicas_ready": 0, "model_loaded": False, "message": "", "observed_at": None}
    detail = f"{URL}{body['id']}/"

    assert alice.get(URL).json()["results"][0]["id"] == body["id"]
    assert alice.get(detail).json()["engine_args"] == ["--enable-prefix-caching"]
    patched = alice.patch(detail, {"max_replicas": 1, "min_replicas": 0}, format="json")
    assert patched.status_code == 200, patched.json()
    assert patched.json()["max_replicas"] == 1
    assert alice.delete(detail).status_code == 204
    assert not InferenceEndpoint.objects.exists()
    actions = AuditEvent.objects.filter(object_id=body["id"]).values_list("action", flat=True)
    assert sorted(actions) == sorted(
        ["inference_endpoint.create", "inference_endpoint.update", "inference_endpoint.delete"]
    )


def test_another_tenants_endpoint_is_not_found_and_a_viewer_reads_but_does_not_write(world):
    endpoint_id = world["alice"].post(URL, BODY, format="json").json()["id"]
    detail = f"{URL}{endpoint_id}/"

    assert world["charlie"].get(detail).status_code == 404
    assert world["charlie"].get(URL).status_code == 404
    assert (
        world["charlie"].get(f"/api/v1/tenants/tenant-b/inference-endpoints/{endpoint_id}/").status_code
        == 404
    )
    assert world["charlie"].delete(detail).status_code == 404
    assert world["bob"].get(detail).status_code == 200
    refused = world["bob"].patch(detail, {"max_replicas": 1}, format="json")
    assert refused.status_code == 403
    assert "member" in refused.json()["detail"]
    assert InferenceEndpoint.objects.get().max_replicas == 2


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"source_uri": "file:///etc/passwd"}, "source_uri", "hf://, s3://, gs://, pvc://"),
        ({"engine_args": ["--port", "9000"]}, "engine_args", "--port is set by the platform"),
        ({"engine_args": "--dtype=half"}, "engine_args", "a list of strings"),
        ({"engine_args": ["--tensor-parallel-size=4"]}, "engine_args", "must equal gpus_per_replica (2)"),
        ({"min_replicas": 3, "max_replicas": 2}, "min_replicas", "must not exceed max_replicas"),
        ({"max_replicas": 0, "min_replicas": 0}, "max_replicas", "from 1 to"),
        ({"name": "Chat Bot"}, "name", "DNS label"),
        ({"gpu_class": "h900"}, "gpu_class", "is not a GPU class"),
        ({"visibility": "published"}, "price_per_million_tokens", "needs a price_per_million_tokens"),
        ({"price_per_million_tokens": "1.5"}, "price_per_million_tokens", "only a published endpoint"),
        ({"visibility": "everyone"}, "visibility", "not a valid choice"),
        ({"gpus_per_replica": 0}, "gpus_per_replica", ""),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_what_is_allowed(world, change, field, says):
    response = world["alice"].post(URL, {**BODY, **change}, format="json")
    assert response.status_code == 400, response.json()
    errors = response.json()["errors"]
    assert field in errors, errors
    assert says in " ".join(errors[field])


def test_replicas_beyond_the_quota_are_a_422_with_what_was_asked_allowed_and_taken(world):
    world["alice"].post(URL, BODY, format="json")
    response = world["alice"].post(URL, {**BODY, "name": "second", "min_replicas": 0}, format="json")
    assert response.status_code == 422
    body = response.json()
    assert body["type"] == "/problems/endpoint-exceeds-quota"
    assert (body["requested"], body["allowed"], body["taken"], body["available"]) == (4, 4, 4, 0)
    assert "max_replicas" in body["errors"]


def test_a_second_endpoint_of_the_same_name_is_a_409(world):
    assert (
        world["alice"].post(URL, {**BODY, "min_replicas": 0, "max_replicas": 1}, format="json").status_code
        == 201
    )
    response = world["alice"].post(URL, {**BODY, "min_replicas": 0, "max_replicas": 1}, format="json")
    assert response.status_code == 409
    assert response.json()["errors"] == {"name": ["already taken in this tenant"]}


def test_a_create_with_an_idempotency_key_is_answered_once(world):
    headers = {"HTTP_IDEMPOTENCY_KEY": "create-chat"}
    first = world["alice"].post(URL, BODY, format="json", **headers)
    again = world["alice"].post(URL, BODY, format="json", **headers)
    assert first.status_code == 201
    assert again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert InferenceEndpoint.objects.count() == 1
