"""The periodic pass (`workers.reconcile_all`): one host cluster that is busy or away holds up no other."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from clusters import tasks
from clusters.tests.conftest import kubeconfig_for
from fleet.models import HostCluster
from gpucloud.locks import exclusive
from tenants.models import Tenant

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def eventually(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.2)


def ready(tenant: Tenant) -> bool:
    return Tenant.objects.get(pk=tenant.pk).state == Tenant.State.READY


@pytest.fixture
def instant(settings: Any) -> None:
    settings.SIMULATED_PROVISION_DELAY = 0
    settings.SIMULATED_DELETE_DELAY = 0


@pytest.fixture
def away(kube_emulator: Any, api: Any, admin: Any, gpu_catalog: None) -> HostCluster:
    """A Kubernetes host cluster, registered first (a serial pass meets it first), that stopped answering."""
    body = {"name": "away", "driver": "kubernetes", "kubeconfig": kubeconfig_for(kube_emulator.url)}
    body["scheduler"] = "kueue"
    response = api(admin).post("/api/v1/host-clusters/", body, format="json")
    assert response.status_code == 201, response.json()
    kube_emulator.stop()
    return HostCluster.objects.get(name="away")


@pytest.fixture
def on_small(make_tenant: Any, small_fleet: HostCluster, instant: None) -> Tenant:
    """A tenant of the second simulated host cluster, created before the worker starts (which empties the
    queues): only the periodic pass will look at it."""
    tenant: Tenant = make_tenant("on-small", host_cluster=small_fleet)
    return tenant


@pytest.fixture
def on_demo(away: HostCluster, make_tenant: Any, demo_fleet: HostCluster, instant: None) -> Tenant:
    tenant: Tenant = make_tenant("on-demo", host_cluster=demo_fleet)
    return tenant


def test_a_host_cluster_whose_lock_is_busy_holds_up_no_other_host_cluster(
    demo_fleet, on_small, celery_worker
):
    assert list(HostCluster.objects.values_list("name", flat=True).order_by("pk")) == ["demo", "small"]
    with exclusive(f"reconcile:host-cluster:{demo_fleet.pk}"):  # a long pass over demo, elsewhere
        tasks.reconcile_all.delay()

        eventually(lambda: ready(on_small), "the tenant of the other host cluster is reconciled")


def test_a_host_cluster_that_does_not_answer_holds_up_no_other_host_cluster(away, on_demo, celery_worker):
    assert list(HostCluster.objects.values_list("name", flat=True).order_by("pk")) == ["away", "demo"]

    tasks.reconcile_all.delay()

    eventually(lambda: ready(on_demo), "the tenant of the other host cluster is reconciled")
    eventually(
        lambda: HostCluster.objects.get(pk=away.pk).state == HostCluster.State.UNREACHABLE,
        "the host cluster away is marked unreachable",
    )
