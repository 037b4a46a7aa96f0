"""Where a tenant stands (`billing.standing`): borrowed and lent against live pod rows of the simulated fleet
`mini` (4 × H100 on h100-0), and each running pod's utilisation from the DCGM samples metering kept."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from billing.services.ingest import ingest_scrape
from billing.standing import _Share, lent_by, standing_of
from billing.tests.conftest import Row, exposition, gpu_uuid
from core.audit import Actor
from fleet.models import GpuClass
from tenants.models import Tenant
from tenants.services import quotas

ADMIN = Actor.console("tests")
H100 = "h100-80gb"


@pytest.fixture
def cohort(tenant_on):
    """Three standard tenants of `mini` (one cohort) and a trusted one (another cohort)."""
    made = {slug: tenant_on(slug) for slug in ("ann", "ben", "cat")}
    made["dan"] = tenant_on("dan", trust_tier=Tenant.TrustTier.TRUSTED)
    return made


def quota(tenant: Tenant, guaranteed: int, burst: int = 0, lendable: int | None = None) -> None:
    gpu_class = GpuClass.objects.get(name=H100)
    quotas.set_quota(
        actor=ADMIN, tenant=tenant, gpu_class=gpu_class, guaranteed=guaranteed, burst=burst, lendable=lendable
    )


def run(make_pod, tenant: Tenant, name: str, gpus: list[int], started: datetime | None = None):
    start = started or timezone.now() - timedelta(hours=1)
    return make_pod(name, f"tenant-{tenant.slug}", H100, "h100-0", gpus, start, tenant=tenant)


def h100(tenant: Tenant):
    return next(c for c in standing_of(tenant, with_cost=False).classes if c.gpu_class == H100)


def test_a_borrower_borrows_beyond_its_guarantee_and_the_idle_member_lends_it(cohort, make_pod):
    ann, ben = cohort["ann"], cohort["ben"]
    quota(ann, 2, burst=2)
    quota(ben, 1, burst=2)
    run(make_pod, ben, "train", [0, 1, 2])  # 1 guaranteed + 2 borrowed

    assert (h100(ben).in_use, h100(ben).borrowed, h100(ben).lent) == (3, 2, 0)
    assert (h100(ann).in_use, h100(ann).borrowed, h100(ann).lent) == (0, 0, 2)


def test_what_a_member_lends_is_bounded_by_its_lendable_units_and_what_it_uses_itself(cohort, make_pod):
    ann, ben = cohort["ann"], cohort["ben"]
    quota(ann, 3, burst=0, lendable=1)
    quota(ben, 1, burst=3)
    run(make_pod, ben, "train", [0, 1, 2])

    assert h100(ann).lent == 1  # ben borrows 2, ann may lend only 1 of its 3 idle units
    run(make_pod, ann, "own", [3])
    quota(ann, 3, burst=0, lendable=None)
    assert h100(ann).lent == 2  # 2 of its 3 are idle now, all lendable


def test_a_tenant_asleep_lends_its_whole_guarantee(cohort, make_pod):
    ann, ben = cohort["ann"], cohort["ben"]
    quota(ann, 2, lendable=0)
    quota(ben, 1, burst=2)
    run(make_pod, ben, "train", [0, 1, 2])
    assert h100(ann).lent == 0
    Tenant.objects.filter(pk=ann.pk).update(asleep_since=timezone.now())
    ann.refresh_from_db()
    assert h100(ann).lent == 2


def test_another_trust_tier_is_another_cohort_and_finished_pods_count_for_nothing(cohort, make_pod):
    ann, dan = cohort["ann"], cohort["dan"]
    quota(ann, 2, burst=0)
    quota(dan, 0, burst=2)
    run(make_pod, dan, "train", [0, 1])
    old = run(make_pod, ann, "done", [2, 3])
    old.finished_at = timezone.now()
    old.save()

    assert (h100(dan).in_use, h100(dan).borrowed) == (2, 2)
    assert (h100(ann).in_use, h100(ann).lent) == (0, 0)


def test_the_cohorts_borrowing_is_shared_in_proportion_to_idle_guarantee_in_whole_units():
    shares = [_Share(1, 2, 0, None, 0), _Share(2, 1, 0, None, 0), _Share(3, 1, 2, None, 2)]
    assert lent_by(shares) == {1: 1, 2: 0}  # 1 unit borrowed: ⅔ to 1, ⅓ to 2
    shares[2] = _Share(3, 1, 2, None, 3)
    assert lent_by(shares) == {1: 1, 2: 1}  # 2 borrowed: 1⅓ and ⅔, the remainder to the larger part
    assert sum(lent_by(shares).values()) == 2


def test_running_pods_are_listed_with_their_utilisation_idle_first(cohort, make_pod, settings):
    settings.METER_MAX_GAP = 3600
    ann = cohort["ann"]
    quota(ann, 3)
    start = (timezone.now() - timedelta(hours=2)).replace(minute=0, second=0, microsecond=0)
    run(make_pod, ann, "busy", [0], started=start)
    run(make_pod, ann, "idle", [1, 2], started=start)
    run(make_pod, ann, "new", [3], started=timezone.now())
    utils = {0: 90.0, 1: 2.0, 2: 4.0}
    for step in range(3):
        rows = [
            Row(gpu_uuid("h100-0", i), pod=f"tenant-ann/{name}", util=utils[i], index=i)
            for i, name in ((0, "busy"), (1, "idle"), (2, "idle"))
        ]
        ingest_scrape(
            ann.cluster.host_cluster,
            "h100-0",
            start + timedelta(minutes=30 * step),
            exposition("h100-0", rows),
        )

    workloads = standing_of(ann, with_cost=False).workloads
    assert [w.name for w in workloads] == ["idle", "busy", "new"]
    idle, busy, new = workloads
    assert (idle.units, idle.utilisation, idle.mean_utilisation) == (2, 3.0, 3.0)
    assert busy.utilisation == 90.0
    assert busy.gpu_hours == pytest.approx(1.0)
    assert idle.gpu_hours == pytest.approx(2.0)
    assert new.utilisation is None
    assert new.mean_utilisation is None
    assert new.gpu_hours == 0
    assert idle.sampled_at == start + timedelta(hours=1)
    assert (idle.memory_mib, busy.memory_mib, new.memory_mib) == (4096, 2048, None)  # FB_USED of its GPUs
    assert idle.cost is None


def test_on_the_fleet_the_cohorts_lending_adds_up_to_its_borrowing(cohort, make_pod):
    ann, ben, cat = cohort["ann"], cohort["ben"], cohort["cat"]
    quota(ann, 2)
    quota(ben, 1)
    quota(cat, 1, burst=1)
    run(make_pod, cat, "train", [0, 1])  # borrows 1: ann has ⅔ of the idle guarantee, ben ⅓

    assert [(h100(t).borrowed, h100(t).lent) for t in (ann, ben, cat)] == [(0, 1), (0, 0), (1, 0)]
