"""The kubernetes driver end to end against a real cluster named by KUBECONFIG.

Run with `pytest -m cluster tests/cluster` (see docs/kubernetes.md for a kind cluster with Kueue, Flux
and vCluster). Environment:

- `KUBECONFIG` (required): the host cluster; the tests are skipped without it.
- `GPUCLOUD_E2E_SCHEDULER`: `kueue` (default) or `kai`.
- `GPUCLOUD_E2E_READY_TIMEOUT`: seconds to wait for the vCluster to become ready (default 600; 0 skips
  the readiness and kubeconfig checks, e.g. on a cluster without internet access to charts.loft.sh).
- `GPUCLOUD_E2E_POLL_SECONDS`: pause between passes while waiting (default 5).

`clusters/tests/test_cluster_suite_on_emulator.py` runs this flow against the emulator, with a thread playing
the controllers, so that the suite itself is exercised on every test run.

Every object the tests create belongs to a tenant named `e2e-<random>` and is deleted at the end.
"""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from clusters.drivers.discovery import check_profile, discover
from clusters.drivers.kubeconfig import read_kubeconfig
from clusters.drivers.kubernetes import KubernetesDriver
from clusters.render import ClusterProfile
from clusters.spec import QuotaSpec, ReconcileResult, TenantSpec
from gpucloud.kube.api import KubeApi, api_client_from_kubeconfig
from gpucloud.kube.errors import TemporaryDriverError

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(
        not os.environ.get("KUBECONFIG"), reason="KUBECONFIG is not set: no cluster to test against"
    ),
]


@pytest.fixture(scope="module")
def api_client() -> Iterator[client.ApiClient]:
    path = os.environ["KUBECONFIG"].split(os.pathsep)[0]
    with open(os.path.expanduser(path)) as kubeconfig:
        api = api_client_from_kubeconfig(kubeconfig.read())
    yield api
    api.close()


def profile_for(api_client: client.ApiClient) -> ClusterProfile:
    """The profile under test, refused with a clear error when the cluster cannot serve it."""
    found = discover(KubeApi(api_client))
    chosen = ClusterProfile(scheduler=os.environ.get("GPUCLOUD_E2E_SCHEDULER", "kueue"))  # type: ignore[arg-type]
    check_profile(found, chosen)
    return dataclasses.replace(chosen, cilium=found.addons["cilium"])


@pytest.fixture(scope="module")
def profile(api_client: client.ApiClient) -> ClusterProfile:
    return profile_for(api_client)


def tenant(slug: str, desired: str = "running", guaranteed: int = 2) -> TenantSpec:
    gpu = (("nvidia.com/gpu.product", "NVIDIA-H200"),)
    quotas = (
        QuotaSpec("h200-141gb", "nvidia.com/gpu", gpu, guaranteed, 2, None, 1),
        QuotaSpec("h200-141gb.mig-1g.18gb", "nvidia.com/mig-1g.18gb", gpu, 7, 0, 3, 1),
    )
    return TenantSpec(slug, f"ten_{slug}", "standard", desired, f"tenant-{slug}", quotas)  # type: ignore[arg-type]


def reconcile(driver: KubernetesDriver, tenants: list[TenantSpec]) -> ReconcileResult:
    for _ in range(5):
        try:
            return driver.reconcile(tenants, complete=False)
        except TemporaryDriverError:
            time.sleep(2)
    return driver.reconcile(tenants, complete=False)


def wait_for(driver: KubernetesDriver, spec: TenantSpec, phase: str, timeout: float) -> ReconcileResult:
    deadline = time.monotonic() + timeout
    while True:
        result = reconcile(driver, [spec])
        if result.observations[spec.slug].phase == phase or time.monotonic() > deadline:
            return result
        time.sleep(float(os.environ.get("GPUCLOUD_E2E_POLL_SECONDS", "5")))


def test_a_tenant_is_provisioned_kept_in_sync_and_deleted(api_client, profile):
    slug = f"e2e-{uuid.uuid4().hex[:6]}"
    driver = KubernetesDriver(api_client, profile)
    core: Any = client.CoreV1Api(api_client)
    objects: Any = client.CustomObjectsApi(api_client)
    try:
        created = reconcile(driver, [tenant(slug)])
        assert created.errors == {}
        assert core.read_namespace(f"tenant-{slug}").metadata.labels["gpucloud.io/tenant"] == slug
        quota = core.read_namespaced_resource_quota("gpucloud-gpu-quota", f"tenant-{slug}")
        assert quota.spec.hard["requests.nvidia.com/gpu"] == "4"
        if profile.scheduler == "kueue":
            cq = objects.get_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", "clusterqueues", f"tenant-{slug}"
            )
            assert cq["spec"]["cohortName"] == "gpucloud-standard"
        else:
            objects.get_cluster_custom_object("scheduling.run.ai", "v2", "queues", f"tenant-{slug}")

        # A real API server defaults fields; the next pass must still see nothing to do.
        assert reconcile(driver, [tenant(slug)]).writes == 0

        core.patch_namespaced_resource_quota(
            "gpucloud-gpu-quota", f"tenant-{slug}", {"spec": {"hard": {"requests.nvidia.com/gpu": "99"}}}
        )
        repaired = reconcile(driver, [tenant(slug)])
        assert repaired.drift_repaired == 1
        quota = core.read_namespaced_resource_quota("gpucloud-gpu-quota", f"tenant-{slug}")
        assert quota.spec.hard["requests.nvidia.com/gpu"] == "4"

        changed = reconcile(driver, [tenant(slug, guaranteed=3)])
        assert changed.writes == 2  # the ResourceQuota and the tenant's queue

        timeout = float(os.environ.get("GPUCLOUD_E2E_READY_TIMEOUT", "600"))
        if timeout > 0:
            ready = wait_for(driver, tenant(slug, guaranteed=3), "ready", timeout)
            assert ready.observations[slug].phase == "ready", ready.observations[slug].message
            endpoint = profile.endpoint(slug)
            kubeconfig = read_kubeconfig(api_client, f"tenant-{slug}", slug, endpoint)
            assert yaml.safe_load(kubeconfig)["clusters"][0]["cluster"]["server"] == endpoint
    finally:
        gone = wait_for(driver, tenant(slug, desired="absent"), "absent", 300)
    assert gone.observations[slug].phase == "absent"
    left = core.list_namespace(label_selector=f"gpucloud.io/tenant={slug}").items
    assert left == []
