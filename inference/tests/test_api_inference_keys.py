"""/api/v1/tenants/{slug}/inference-keys/: the secret shown once and stored as an HMAC, limits validated with
messages naming the field, revoke audited and immediate, another tenant's key not found (alice owns
tenant-a, bob is a viewer there, charlie owns tenant-b)."""

import pytest

from core.audit import Actor
from core.models import AuditEvent
from fleet.models import GpuClass
from inference import keys
from inference.models import InferenceKey
from inference.services import create_endpoint
from tenants.services import quotas

URL = "/api/v1/tenants/tenant-a/inference-keys/"


@pytest.fixture
def world(people, api):
    h200 = GpuClass.objects.get(name="h200-141gb")
    quotas.set_quota(actor=Actor.of(people["admin"]), tenant=people["a"], gpu_class=h200, guaranteed=1)
    create_endpoint(
        actor=Actor.of(people["alice"]),
        tenant=people["a"],
        name="chat",
        model_name="org/model",
        source_uri="hf://org/model",
        gpu_class=h200,
    )
    return {name: api(people[name]) for name in ("alice", "bob", "charlie")}


def test_the_key_is_shown_once_and_only_its_hmac_is_stored(world):
    created = world["alice"].post(URL, {"name": "app", "rpm": 60, "endpoints": ["chat"]}, format="json")

    assert created.status_code == 201, created.json()
    body = created.json()
    text = body["key"]
    assert text.startswith("gpk_")
    assert len(text) == keys.LENGTH
    assert body["prefix"] == text[4:12]
    assert body["endpoints"] == ["chat"]
    assert body["rpm"] == 60
    assert body["tpm"] is None
    row = InferenceKey.objects.get()
    assert text not in (row.digest, row.prefix)
    assert row.digest == keys.digest(text)
    listed = world["alice"].get(URL).json()["results"][0]
    detail = world["bob"].get(f"{URL}{body['id']}/").json()
    assert "key" not in listed
    assert "key" not in detail
    assert keys.check(text)[0] == row


def test_revoking_is_audited_immediate_and_kept_in_the_list(world):
    created = world["alice"].post(URL, {"name": "app"}, format="json").json()
    detail = f"{URL}{created['id']}/"

    assert world["bob"].delete(detail).status_code == 403  # a viewer reads keys but does not revoke them
    revoked = world["alice"].delete(detail)
    assert revoked.status_code == 200
    assert revoked.json()["revoked_at"] is not None
    row, reason = keys.check(created["key"])
    assert row is None
    assert reason.startswith("the API key was revoked at ")
    assert world["alice"].delete(detail).status_code == 200  # twice: nothing more happens
    actions = AuditEvent.objects.filter(object_id=created["id"]).values_list("action", flat=True)
    assert sorted(actions) == ["inference_key.create", "inference_key.revoke"]
    assert "key" not in str(AuditEvent.objects.get(action="inference_key.create").after)


def test_another_tenants_key_is_not_found(world):
    created = world["alice"].post(URL, {"name": "app"}, format="json").json()

    assert world["charlie"].get(f"{URL}{created['id']}/").status_code == 404
    assert world["charlie"].delete(f"{URL}{created['id']}/").status_code == 404
    other = f"/api/v1/tenants/tenant-b/inference-keys/{created['id']}/"
    assert world["charlie"].get(other).status_code == 404
    assert InferenceKey.objects.get().revoked_at is None


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"name": " "}, "name", "may not be blank"),
        ({"name": "app", "rpm": 0}, "rpm", "rpm must be above 0"),
        ({"name": "app", "monthly_budget": "-1"}, "monthly_budget", "above 0"),
        ({"name": "app", "endpoints": ["nope"]}, "endpoints", "no inference endpoint called nope"),
        ({"name": "app", "expires_at": "2001-01-01T00:00:00Z"}, "expires_at", "in the future"),
    ],
)
def test_bad_limits_are_refused_naming_the_field(world, body, field, says):
    refused = world["alice"].post(URL, body, format="json")

    assert refused.status_code == 400, refused.json()
    assert says in " ".join(refused.json()["errors"][field])
    assert not InferenceKey.objects.exists()


def test_an_expired_key_is_refused_with_when(world, people):
    key, text = keys.create_key(actor=Actor.of(people["alice"]), tenant=people["a"], name="app")
    InferenceKey.objects.filter(pk=key.pk).update(expires_at="2001-01-01T00:00:00Z")

    assert keys.check(text) == (None, "the API key expired at 2001-01-01T00:00:00Z")
    assert keys.check("gpk_short")[1] == "the API key is not a gpucloud inference key (gpk_…)"
