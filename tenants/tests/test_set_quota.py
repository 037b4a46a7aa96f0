import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.audit import Actor
from core.models import AuditEvent
from fleet.models import Gpu, GpuClass
from gpucloud.errors import CapacityExceeded, Conflict, PermissionDenied, ValidationFailed
from tenants.capacity import capacity_of
from tenants.models import Quota, Tenant
from tenants.services import quotas


def h200(name="h200-141gb"):
    return GpuClass.objects.get(name=name)


def set_quota(admin, tenant, gpu_class, guaranteed, **kwargs):
    return quotas.set_quota(
        actor=Actor.of(admin), tenant=tenant, gpu_class=gpu_class, guaranteed=guaranteed, **kwargs
    )


def test_a_guarantee_within_capacity_is_admitted_and_audited(admin, make_tenant, demo_fleet):
    tenant = make_tenant("vision")
    quota, created = set_quota(admin, tenant, h200(), 8, burst=4, lendable=2, weight=3)

    assert created
    assert (quota.guaranteed, quota.burst, quota.lendable, quota.weight) == (8, 4, 2, 3)
    assert capacity_of(h200(), demo_fleet).guaranteed == 8
    assert capacity_of(h200(), demo_fleet).available == 56
    assert AuditEvent.objects.get(action="quota.set").after["guaranteed"] == 8


def test_it_refuses_a_quota_above_capacity_naming_the_numbers(admin, make_tenant):
    vision, speech = make_tenant("vision"), make_tenant("speech")
    set_quota(admin, vision, h200(), 60)

    with pytest.raises(CapacityExceeded) as refusal:
        set_quota(admin, speech, h200(), 5)

    assert refusal.value.extra == {
        "host_cluster": "demo",
        "gpu_class": "h200-141gb",
        "capacity": 64,
        "guaranteed": 60,
        "requested": 5,
        "available": 4,
    }
    assert "host cluster demo" in refusal.value.detail
    assert "capacity there is 64, 60 is already guaranteed" in refusal.value.detail
    assert not Quota.objects.filter(tenant=speech).exists()


def test_raising_ones_own_quota_does_not_count_the_old_value_twice(admin, make_tenant):
    tenant = make_tenant("vision")
    set_quota(admin, tenant, h200(), 60)
    quota, created = set_quota(admin, tenant, h200(), 64)
    assert not created
    assert quota.guaranteed == 64


def test_mig_guarantees_hold_whole_gpus_of_their_model(admin, make_tenant, demo_fleet):
    vision, speech = make_tenant("vision"), make_tenant("speech")
    set_quota(admin, vision, h200("h200-141gb.mig-1g.18gb"), 15)  # 15 slices of 7 per GPU: 3 GPUs

    assert capacity_of(h200(), demo_fleet).available == 61
    with pytest.raises(CapacityExceeded):
        set_quota(admin, speech, h200(), 62)


def test_quarantined_gpus_are_not_capacity(admin, make_tenant, demo_fleet):
    tenant = make_tenant("vision")
    ten = list(Gpu.objects.filter(gpu_model__slug="h200-141gb").values_list("pk", flat=True)[:10])
    Gpu.objects.filter(pk__in=ten).update(health=Gpu.Health.QUARANTINED)

    assert capacity_of(h200(), demo_fleet).capacity == 54
    with pytest.raises(CapacityExceeded):
        set_quota(admin, tenant, h200(), 55)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("guaranteed", -1),
        ("guaranteed", 1.5),
        ("guaranteed", "8"),
        ("burst", -2),
        ("weight", 0),
        ("lendable", 9),
    ],
)
def test_it_refuses_bad_numbers_and_says_which_field(admin, make_tenant, field, value):
    tenant = make_tenant("vision")
    values = {"guaranteed": 8, field: value}
    with pytest.raises(ValidationFailed) as refusal:
        set_quota(admin, tenant, h200(), **values)
    assert field in refusal.value.errors
    assert not Quota.objects.exists()


def test_a_deleted_tenants_guarantee_returns_to_the_pool(admin, make_tenant, demo_fleet):
    tenant = make_tenant("vision")
    set_quota(admin, tenant, h200(), 64)
    Tenant.objects.filter(pk=tenant.pk).update(state=Tenant.State.DELETED)

    assert capacity_of(h200(), demo_fleet).available == 64


def test_quotas_of_a_deleting_tenant_cannot_change(admin, make_tenant):
    tenant = make_tenant("vision")
    Tenant.objects.filter(pk=tenant.pk).update(state=Tenant.State.DELETING)
    tenant.refresh_from_db()
    with pytest.raises(Conflict):
        set_quota(admin, tenant, h200(), 1)


def test_tenant_owners_cannot_grant_themselves_quota(people):
    with pytest.raises(PermissionDenied):
        set_quota(people["alice"], people["a"], h200(), 1)


def test_removing_a_quota_frees_its_guarantee(admin, make_tenant, demo_fleet):
    tenant = make_tenant("vision")
    quota, _ = set_quota(admin, tenant, h200(), 10)
    quotas.remove_quota(actor=Actor.of(admin), quota=quota)

    assert capacity_of(h200(), demo_fleet).available == 64
    assert AuditEvent.objects.get(action="quota.remove").before["guaranteed"] == 10


def test_a_guarantee_is_admitted_against_its_own_host_clusters_gpus_only(admin, make_tenant, small_fleet):
    small = make_tenant("small-team", host_cluster=small_fleet)  # 8 H200 there, 64 on the demo fleet

    with pytest.raises(CapacityExceeded) as refusal:
        set_quota(admin, small, h200(), 60)

    assert refusal.value.extra == {
        "host_cluster": "small",
        "gpu_class": "h200-141gb",
        "capacity": 8,
        "guaranteed": 0,
        "requested": 60,
        "available": 8,
    }
    assert "on host cluster small" in refusal.value.detail
    assert "at most 8" in refusal.value.detail
    set_quota(admin, small, h200(), 8)
    # The demo fleet's 64 are untouched by the small cluster's guarantee, and the other way round.
    set_quota(admin, make_tenant("big-team"), h200(), 64)
    assert capacity_of(h200(), small_fleet).available == 0
    with pytest.raises(CapacityExceeded):
        set_quota(admin, make_tenant("third", host_cluster=small_fleet), h200("h200-141gb.mig-1g.18gb"), 1)


def test_a_new_tenant_goes_where_most_gpus_are_not_yet_guaranteed(admin, make_tenant, small_fleet):
    first = make_tenant("first")
    assert first.cluster.host_cluster.name == "demo"  # 64 free against 8
    set_quota(admin, first, h200(), 60)
    set_quota(admin, first, h200("a100-80gb"), 40)

    assert make_tenant("second").cluster.host_cluster.name == "small"  # 8 free against 4


def test_a_tenants_own_guarantees_of_other_classes_of_the_model_count_against_a_new_one(admin, make_tenant):
    vision = make_tenant("vision")
    set_quota(admin, vision, h200(), 8)  # 8 of the demo fleet's 64 H200
    mig = h200("h200-141gb.mig-1g.18gb")  # 7 a GPU

    with pytest.raises(CapacityExceeded) as refusal:
        set_quota(admin, vision, mig, 57 * 7)

    assert refusal.value.extra["available"] == 56 * 7
    set_quota(admin, vision, mig, 56 * 7)
    assert capacity_of(h200(), vision.cluster.host_cluster).available == 0


def test_the_admission_lock_is_held_only_for_the_reads_and_writes_that_need_it(admin, make_tenant):
    tenant = make_tenant("vision")
    set_quota(admin, tenant, h200(), 8)
    make_tenant("speech")  # another tenant guaranteeing nothing

    with CaptureQueriesContext(connection) as queries:
        set_quota(admin, tenant, h200(), 4, burst=2)

    statements = [q["sql"] for q in queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]
    locked = next(i for i, sql in enumerate(statements) if '"tenants_admissionlock"' in sql)
    assert "FOR UPDATE" in statements[locked]
    # Every change of a model's guarantees on a host cluster waits for this lock: under it, only the
    # guarantees, the healthy GPUs node by node and the nodes dedicated to isolated tenants are read, then the
    # quota and its audit row written (the commit follows).
    held = [sql.split()[0] + (" audit" if "tenants_auditevent" in sql else "") for sql in statements]
    assert held[locked + 1 :] == ["SELECT", "SELECT", "SELECT", "UPDATE", "INSERT audit"]
    assert '"tenants_quota"' in statements[locked + 1]
    assert '"scheduling_gpu"' in statements[locked + 2]
    assert '"tenants_dedicatednode"' in statements[locked + 3]
