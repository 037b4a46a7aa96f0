"""DRA pods in the live view: the GPUs a pod holds through its allocated ResourceClaims (resource.k8s.io/v1)
become `fleet.Pod` rows like a device-plugin pod's, whole GPUs by index and MIG instances by profile."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from clusters.tests.conftest import host  # noqa: F401  (the registered host cluster fixture)
from fleet import selectors as fleet
from fleet.models import Gpu, HostCluster, Pod
from placement.extender.feed import ClusterFeed
from placement.live import claims as dra
from placement.live.pods import Devices, claim_names
from placement.live.view import LiveView
from placement.live.watch import live_pass
from placement.tests.test_live_view import T0, api_of, gpu_pod, rfc, vision  # noqa: F401
from tenants.models import Tenant
from tests.kube_emulator import RunningEmulator

NS = "tenant-vision"


def claim(
    name: str, *devices: str, driver: str = dra.DRIVER, device_class: str = "gpu.nvidia.com"
) -> dict[str, Any]:
    """A ResourceClaim; with `devices`, allocated them (results of request "gpu", pool the node)."""
    request = {"name": "gpu", "exactly": {"deviceClassName": device_class, "count": len(devices) or 1}}
    out: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"devices": {"requests": [request]}},
    }
    if devices:
        results = [{"request": "gpu", "driver": driver, "pool": "h200-1", "device": d} for d in devices]
        out["status"] = {"allocation": {"devices": {"results": results}}}
    return out


def dra_pod(
    name: str, node: str | None, *, claim_name: str = "", template: str = "", made: str = ""
) -> dict[str, Any]:
    """A pod using a claim by name, or a template (whose claim the controller `made`)."""
    pod = gpu_pod(name, node or "", gpus=1)
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    entry = (
        {"name": "gpu", "resourceClaimName": claim_name}
        if claim_name
        else {
            "name": "gpu",
            "resourceClaimTemplateName": template,
        }
    )
    pod["spec"]["resourceClaims"] = [entry]
    if made:
        pod["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": made}]
    if node is None:
        del pod["spec"]["nodeName"]
        pod["status"] = {"phase": "Pending"}
    return pod


def uuid(node: str, index: int) -> str:
    return Gpu.objects.get(node__name=node, index=index).uuid


# --- reading claims (pure) -----------------------------------------------------------------------


def test_a_pod_names_its_claims_directly_or_through_the_claim_made_from_its_template() -> None:
    pod = dra_pod("p", "h200-1", claim_name="shared-claim")
    pod["spec"]["resourceClaims"].append({"name": "extra", "resourceClaimTemplateName": "h200-141gb"})
    assert claim_names(pod) == ("shared-claim",), "the template's claim is not made yet"
    pod["status"]["resourceClaimStatuses"] = [{"name": "extra", "resourceClaimName": "p-extra-x7k2q"}]
    assert claim_names(pod) == ("shared-claim", "p-extra-x7k2q")


@pytest.mark.parametrize(
    ("device", "profile", "gpu"),
    [
        ("gpu-3-mig-19-2-1", "1g.18gb", 3),
        ("gpu-0-mig-15-4-2", "1g.35gb", 0),
        ("gpu-1-mig-14-0-2", "2g.35gb", 1),
        ("gpu-2-mig-9-4-4", "3g.71gb", 2),
        ("gpu-5-mig-5-0-4", "4g.71gb", 5),
        ("gpu-7-mig-0-0-8", "7g.141gb", 7),
        ("gpu-6-mig-20-6-1", "1g.18gb+me", 6),
    ],
)
def test_a_mig_device_is_named_by_its_gpu_instance_profile_on_the_nodes_model(
    device: str, profile: str, gpu: int
) -> None:
    assert dra.devices([claim("c", device)], "h200-141gb") == Devices(mig_profile=profile, indexes=(gpu,))


def test_whole_gpus_other_drivers_and_unallocated_claims() -> None:
    assert dra.devices([claim("c", "gpu-2", "gpu-5")], "h200-141gb") == Devices(2, indexes=(2, 5))
    assert not dra.devices([claim("c", "gpu-2", driver="example.com/fpga")], "h200-141gb").any
    assert not dra.devices([claim("c")], "h200-141gb").any
    assert not dra.devices([claim("c", "gpu-vfio-0")], "h200-141gb").any
    # A profile id this reading does not know: gpucloud's DeviceClass (clusters/render/dra.py) names it.
    by_class = claim("c", "gpu-4-mig-99-0-2", device_class="gpucloud-h200-141gb.mig-2g.35gb")
    assert dra.devices([by_class], "h200-141gb") == Devices(mig_profile="2g.35gb", indexes=(4,))


# --- in the live view ----------------------------------------------------------------------------


def test_dra_pods_get_rows_with_their_claims_devices(
    host: HostCluster,  # noqa: F811
    vision: Tenant,  # noqa: F811
    kube_emulator: RunningEmulator,
) -> None:
    kube_emulator.register_crds("dra")
    kube_emulator.put_object(claim("train-claim", "gpu-2", "gpu-5"))
    kube_emulator.put_object(dra_pod("train-0", "h200-1", claim_name="train-claim"))
    kube_emulator.put_object(claim("infer-0-gpu-q8z4m", "gpu-3-mig-19-2-1", device_class="mig.nvidia.com"))
    kube_emulator.put_object(
        dra_pod("infer-0", "h200-1", template="h200-141gb.mig-1g.18gb", made="infer-0-gpu-q8z4m")
    )
    assert live_pass(host, watch_seconds=1, api=api_of(kube_emulator)).listed

    pods = {p.name: p for p in Pod.objects.filter(host_cluster=host)}
    assert set(pods) == {"train-0", "infer-0"}
    assert pods["train-0"].gpu_class.name == "h200-141gb"
    assert pods["train-0"].gpu_uuids == [uuid("h200-1", 2), uuid("h200-1", 5)]
    assert pods["train-0"].tenant_id == vision.pk
    assert pods["infer-0"].gpu_class.name == "h200-141gb.mig-1g.18gb"
    assert pods["infer-0"].gpu_uuids == [uuid("h200-1", 3)]
    assert pods["infer-0"].gpu_instance_id is not None
    assert fleet.units_in_use([vision.pk]) == {
        (vision.pk, "h200-141gb"): 2,
        (vision.pk, "h200-141gb.mig-1g.18gb"): 1,
    }


def test_a_claim_allocated_after_the_list_is_fetched_when_its_pod_is_bound(
    host: HostCluster,  # noqa: F811
    vision: Tenant,  # noqa: F811
    kube_emulator: RunningEmulator,
) -> None:
    kube_emulator.register_crds("dra")
    kube_emulator.put_object(claim("late-claim"))  # not allocated yet
    kube_emulator.put_object(dra_pod("late", None, claim_name="late-claim"))
    feed = ClusterFeed(api_of(kube_emulator), watch_seconds=1)
    feed.sinks.append(LiveView(host, claims=feed.claims))
    version = feed.list_pass(None)
    assert not Pod.objects.filter(host_cluster=host).exists()

    kube_emulator.put_object(claim("late-claim", "gpu-1"))  # the scheduler allocated it, then bound the pod
    kube_emulator.put_object(dra_pod("late", "h200-1", claim_name="late-claim"))
    feed.watch(None, version, threading.Event())
    row = Pod.objects.get(host_cluster=host, name="late")
    assert row.gpu_uuids == [uuid("h200-1", 1)]
    assert row.started_at == T0
    path = "/apis/resource.k8s.io/v1/namespaces/tenant-vision/resourceclaims/late-claim"
    assert ("GET", path, 200) in kube_emulator.log
    assert feed.claims.fetches == 1


def test_a_cluster_without_the_dra_api_is_read_without_claims(
    host: HostCluster,  # noqa: F811
    vision: Tenant,  # noqa: F811
    kube_emulator: RunningEmulator,
) -> None:
    """resource.k8s.io/v1 not served (Kubernetes before 1.34): the DRA pod gets no row, the rest do."""
    kube_emulator.put_object(dra_pod("dra-0", "h200-1", claim_name="c"))
    kube_emulator.put_object(gpu_pod("plugin-0", "h200-2", gpus=1))
    outcome = live_pass(host, watch_seconds=1, api=api_of(kube_emulator))
    assert outcome.listed
    assert set(Pod.objects.filter(host_cluster=host).values_list("name", flat=True)) == {"plugin-0"}
    kube_emulator.put_object(dra_pod("dra-1", "h200-1", claim_name="c"))
    live_pass(host, watch_seconds=1, api=api_of(kube_emulator))  # no fetch of a claim the API lacks
    assert not [p for m, p, _ in kube_emulator.log if m == "GET" and p.endswith("/resourceclaims/c")]


def test_a_cluster_that_forbids_reading_claims_is_read_without_them(
    host: HostCluster,  # noqa: F811
    vision: Tenant,  # noqa: F811
    kube_emulator: RunningEmulator,
    caplog: pytest.LogCaptureFixture,
) -> None:
    kube_emulator.register_crds("dra")
    kube_emulator.emulator.faults.forbidden.add("/apis/resource.k8s.io/v1/")
    kube_emulator.put_object(claim("c", "gpu-0"))
    kube_emulator.put_object(dra_pod("dra-0", "h200-1", claim_name="c"))
    kube_emulator.put_object(gpu_pod("plugin-0", "h200-2", gpus=1))
    assert live_pass(host, watch_seconds=1, api=api_of(kube_emulator)).listed
    assert set(Pod.objects.filter(host_cluster=host).values_list("name", flat=True)) == {"plugin-0"}
    assert any("reads no ResourceClaims" in r.message and r.levelname == "WARNING" for r in caplog.records)


def test_a_finished_dra_pod_keeps_its_row_when_its_claim_is_gone(
    host: HostCluster,  # noqa: F811
    vision: Tenant,  # noqa: F811
    kube_emulator: RunningEmulator,
) -> None:
    kube_emulator.register_crds("dra")
    kube_emulator.put_object(claim("c", "gpu-0"))
    kube_emulator.put_object(dra_pod("job", "h200-2", claim_name="c"))
    live_pass(host, watch_seconds=1, api=api_of(kube_emulator))
    kube_emulator.remove_object("resource.k8s.io/v1", "ResourceClaim", "c", NS)
    terminated = {"terminated": {"exitCode": 0, "finishedAt": rfc(T0.replace(minute=5))}}
    kube_emulator.edit_object(
        "v1",
        "Pod",
        "job",
        NS,
        {"status": {"phase": "Succeeded", "containerStatuses": [{"name": "c", "state": terminated}]}},
    )
    live_pass(host, watch_seconds=1, api=api_of(kube_emulator))
    row = Pod.objects.get(host_cluster=host, name="job")
    assert (row.phase, row.finished_at) == (Pod.Phase.SUCCEEDED, T0.replace(minute=5))
    assert row.gpu_uuids == [uuid("h200-2", 0)]
