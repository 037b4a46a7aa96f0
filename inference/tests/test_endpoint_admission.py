"""Admission of an endpoint's replicas against the tenant's quota of its class (inference/services.py): the
sum of the minimums is guaranteed, the sum of the maximums may borrow up to guaranteed + burst."""

import pytest

from core.audit import Actor
from core.models import AuditEvent
from fleet.models import GpuClass
from gpucloud.errors import Conflict, PermissionDenied, TierForbidsClass, ValidationFailed
from inference.models import InferenceEndpoint
from inference.services import EndpointExceedsQuota, create_endpoint, delete_endpoint, update_endpoint
from tenants.services import members, quotas

WHOLE, MIG, SHARED = "h200-141gb", "h200-141gb.mig-1g.18gb", "h200-141gb.shared"


@pytest.fixture
def team(admin, make_tenant):
    """Tenant `team` (standard) with 4 H200s guaranteed and 4 more of burst."""
    tenant = make_tenant("team")
    quotas.set_quota(
        actor=Actor.of(admin),
        tenant=tenant,
        gpu_class=GpuClass.objects.get(name=WHOLE),
        guaranteed=4,
        burst=4,
    )
    return tenant


def make(admin, tenant, name="chat", gpu_class=WHOLE, **fields):
    return create_endpoint(
        actor=Actor.of(admin),
        tenant=tenant,
        name=name,
        model_name="Qwen/Qwen3-8B",
        source_uri="hf://Qwen/Qwen3-8B",
        gpu_class=GpuClass.objects.select_related("gpu_model").get(name=gpu_class),
        **fields,
    )


def test_an_endpoint_may_borrow_its_maximum_up_to_guaranteed_plus_burst(admin, team):
    endpoint = make(admin, team, gpus_per_replica=2, min_replicas=1, max_replicas=4)
    assert endpoint.units_at_max == 8
    assert endpoint.served_model_name == "Qwen/Qwen3-8B"  # defaults to the model's name


def test_a_maximum_beyond_the_burst_is_refused_saying_what_was_asked_allowed_and_taken(admin, team):
    make(admin, team, "first", min_replicas=1, max_replicas=5)

    with pytest.raises(EndpointExceedsQuota) as refusal:
        make(admin, team, "second", min_replicas=0, max_replicas=4)

    assert refusal.value.errors["max_replicas"]
    assert refusal.value.extra == {
        "gpu_class": WHOLE, "requested": 4, "allowed": 8, "taken": 5, "available": 3
    }  # fmt: skip
    assert "allows 8 (guaranteed + burst)" in refusal.value.detail
    assert "already take 5" in refusal.value.detail


def test_the_minimums_must_fit_the_guarantee(admin, team):
    make(admin, team, "first", min_replicas=3, max_replicas=3)

    with pytest.raises(EndpointExceedsQuota) as refusal:
        make(admin, team, "second", min_replicas=2, max_replicas=2)

    assert refusal.value.errors["min_replicas"]
    assert refusal.value.extra["allowed"] == 4
    assert refusal.value.extra["available"] == 1
    assert not InferenceEndpoint.objects.filter(name="second").exists()


def test_a_stopped_endpoint_holds_nothing_and_starting_it_is_admitted_again(admin, team):
    stopped = make(admin, team, "idle", min_replicas=4, max_replicas=8, desired="stopped")
    make(admin, team, "busy", min_replicas=4, max_replicas=4)

    with pytest.raises(EndpointExceedsQuota):
        update_endpoint(actor=Actor.of(admin), endpoint=stopped, desired="running")
    stopped.refresh_from_db()
    assert stopped.desired == "stopped"


def test_an_update_is_admitted_without_counting_the_endpoint_twice(admin, team):
    endpoint = make(admin, team, min_replicas=4, max_replicas=8)
    updated = update_endpoint(actor=Actor.of(admin), endpoint=endpoint, min_replicas=2)
    assert updated.min_replicas == 2


def test_a_class_without_quota_is_refused_naming_the_quotas_held(admin, team):
    with pytest.raises(EndpointExceedsQuota) as refusal:
        make(admin, team, gpu_class=MIG)
    assert "holds no quota of h200-141gb.mig-1g.18gb" in refusal.value.detail
    assert "its quotas: h200-141gb" in refusal.value.detail


def test_a_class_the_tier_forbids_is_refused_by_the_tier_rule(admin, make_tenant):
    solo = make_tenant("solo", trust_tier="isolated")
    with pytest.raises(TierForbidsClass):
        make(admin, solo, gpu_class=SHARED)


def test_the_name_is_unique_in_the_tenant(admin, team):
    make(admin, team, min_replicas=0)
    with pytest.raises(Conflict, match="already has an inference endpoint called chat"):
        make(admin, team, min_replicas=0)


def test_a_viewer_may_not_create_and_a_member_may_not_publish(admin, team, make_user):
    vera, maxi = Actor.of(make_user("vera")), Actor.of(make_user("max"))
    members.add_member(actor=Actor.of(admin), tenant=team, username="vera", role="viewer")
    members.add_member(actor=Actor.of(admin), tenant=team, username="max", role="member")
    with pytest.raises(PermissionDenied, match="creating an inference endpoint needs one of these roles"):
        create_endpoint(
            actor=vera, tenant=team, name="x", model_name="m", source_uri="hf://m",
            gpu_class=GpuClass.objects.get(name=WHOLE),
        )  # fmt: skip
    endpoint = create_endpoint(
        actor=maxi, tenant=team, name="x", model_name="m", source_uri="hf://m",
        gpu_class=GpuClass.objects.get(name=WHOLE),
    )  # fmt: skip
    with pytest.raises(PermissionDenied, match="publishing an inference endpoint needs one of these roles"):
        update_endpoint(actor=maxi, endpoint=endpoint, visibility="published", price_per_million_tokens="0.5")


def test_every_write_is_audited_with_before_and_after(admin, team):
    endpoint = make(admin, team, min_replicas=0)
    update_endpoint(actor=Actor.of(admin), endpoint=endpoint, max_replicas=2)
    delete_endpoint(actor=Actor.of(admin), endpoint=endpoint)

    events = list(AuditEvent.objects.filter(object_id=endpoint.public_id).order_by("id"))
    assert [e.action for e in events] == [
        "inference_endpoint.create", "inference_endpoint.update", "inference_endpoint.delete"
    ]  # fmt: skip
    assert events[1].before["max_replicas"] == 1
    assert events[1].after["max_replicas"] == 2
    assert events[2].after is None


def test_bad_fields_are_refused_before_anything_is_written(admin, team):
    with pytest.raises(ValidationFailed) as refusal:
        make(admin, team, engine_args=["--port=9000"])
    assert refusal.value.errors["engine_args"]
    assert not InferenceEndpoint.objects.exists()
