"""Metering a DRA pod a tenant made inside its vCluster: the live view reads the claim vCluster synced to
the host (placement/live/claims.py), the pod's row carries the claim's device, and billing
(billing/lifecycle.py) bills the pod's seconds on that device and no other."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Sum

from billing.lifecycle import pod_facts
from billing.models import UsageEntry
from billing.services.ingest import ingest_rounds
from billing.tests.conftest import Row, exposition
from clusters.tests.conftest import host  # noqa: F401  (the registered host cluster fixture)
from fleet.models import HostCluster, Pod
from placement.tests.test_live_dra import claim, dra_pod, uuid
from placement.tests.test_live_view import T0, finish, one_pass, vision  # noqa: F401
from tenants.models import Tenant
from tests.kube_emulator import RunningEmulator

# vCluster's host names for the pod `train` and its template `h200-141gb` in the vCluster's `default`
# namespace, and the claim the host's resource claim controller made from the synced template.
POD = "train-x-default-x-vision"
TEMPLATE = "h200-141gb-x-default-x-vision"
CLAIM = "train-x-default-x-vision-gpu-7xk2p"


def put_synced_pod(em: RunningEmulator, device: str, start_s: int) -> None:
    em.register_crds("dra")
    em.put_object(claim(CLAIM, device, device_class="gpucloud-h200-141gb"))
    pod = dra_pod(POD, "h200-1", template=TEMPLATE, made=CLAIM)
    pod["status"]["startTime"] = (T0 + timedelta(seconds=start_s)).strftime("%Y-%m-%dT%H:%M:%SZ")
    em.put_object(pod)


def billed(gpu_uuid: str | None = None) -> int:
    entries = UsageEntry.objects.filter(pod=POD)
    if gpu_uuid is not None:
        entries = entries.filter(device=gpu_uuid)
    return int(entries.aggregate(s=Sum("gpu_us"))["s"] or 0)


def test_a_dra_pod_from_a_vcluster_is_billed_on_its_claims_device(
    host: HostCluster,  # noqa: F811
    vision: Tenant,  # noqa: F811
    kube_emulator: RunningEmulator,
) -> None:
    """DCGM sees the pod on gpu-5 at the 30 s scrape; it ran from 22 s to 51 s: 29 s on that GPU."""
    one_pass(host, kube_emulator)
    put_synced_pod(kube_emulator, "gpu-5", start_s=22)
    finish(kube_emulator, POD, T0 + timedelta(seconds=51))
    one_pass(host, kube_emulator)
    row = Pod.objects.get(host_cluster=host, name=POD)
    held, other = uuid("h200-1", 5), uuid("h200-1", 4)
    assert row.gpu_uuids == [held]
    assert row.tenant_id == vision.pk

    def scrape(seen: bool) -> str:
        pod = f"tenant-vision/{POD}" if seen else ""
        return exposition(
            "h200-1", [Row(held, model="NVIDIA H200", pod=pod), Row(other, model="NVIDIA H200")]
        )

    rounds = [(T0 + timedelta(seconds=t), {"h200-1": scrape(t == 30)}) for t in (0, 30, 60)]
    ingest_rounds(host, rounds, facts=pod_facts(host, T0 + timedelta(seconds=60), 120))
    assert billed(held) == 29 * 10**6
    assert billed() == billed(held)  # nothing on the GPU beside it
    assert set(UsageEntry.objects.filter(pod=POD).values_list("tenant_id", flat=True)) == {vision.pk}


def test_a_dra_pod_between_two_scrapes_is_billed_its_lifetime_on_its_claims_device(
    host: HostCluster,  # noqa: F811
    vision: Tenant,  # noqa: F811
    kube_emulator: RunningEmulator,
) -> None:
    """DCGM never sees it (5 s to 15 s, scrapes at 0 and 30): the row's device says where it ran."""
    one_pass(host, kube_emulator)
    put_synced_pod(kube_emulator, "gpu-2", start_s=5)
    finish(kube_emulator, POD, T0 + timedelta(seconds=15))
    one_pass(host, kube_emulator)
    held = uuid("h200-1", 2)
    idle = exposition("h200-1", [Row(held, model="NVIDIA H200"), Row(uuid("h200-1", 3), model="NVIDIA H200")])
    rounds = [(T0 + timedelta(seconds=t), {"h200-1": idle}) for t in (0, 30)]
    ingest_rounds(host, rounds, facts=pod_facts(host, T0 + timedelta(seconds=30), 120))
    assert billed(held) == 10 * 10**6
    assert billed() == billed(held)
