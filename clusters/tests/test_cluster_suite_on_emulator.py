"""The `cluster` suite's flow, run against the emulator with a thread playing the cluster's controllers.

This keeps tests/cluster/test_cluster_e2e.py exercised where no real cluster is available; it checks the
suite's own logic, not real-cluster semantics.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from gpucloud.kube.api import api_client_for_url
from tests.cluster import test_cluster_e2e as suite
from tests.cluster import test_hostile_pods as hostile_pods
from tests.judges import admission as admission_judge
from tests.kube_emulator import KubeEmulator, RunningEmulator, start_emulator

RELEASES = ("helm.toolkit.fluxcd.io", "v2", "helmreleases")


def play_controllers(emulator: KubeEmulator) -> None:
    """What Flux, vCluster and the namespace controller would do by now."""
    for namespace, name in list(emulator.store[RELEASES]):
        emulator.make_vcluster_ready(namespace or "", name)
    emulator.finish_namespace_deletions()


@pytest.fixture
def controlled_emulator() -> Iterator[RunningEmulator]:
    em = start_emulator(crds=("kueue", "flux"))
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(0.05):
            em.call(play_controllers, em.emulator)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield em
    stop.set()
    thread.join()
    em.stop()


def test_the_cluster_suite_flow_passes_against_the_emulator(controlled_emulator, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_E2E_READY_TIMEOUT", "30")
    monkeypatch.setenv("GPUCLOUD_E2E_POLL_SECONDS", "0.1")
    api = api_client_for_url(controlled_emulator.url)

    suite.test_a_tenant_is_provisioned_kept_in_sync_and_deleted(api, suite.profile_for(api))

    assert controlled_emulator.objects_of("v1", "Namespace") == []


def test_the_hostile_pod_flow_passes_against_the_emulator_with_the_judge_as_its_admission(
    controlled_emulator, monkeypatch
):
    """The stand-in has no admission of its own: the CEL judge plays the API server's policy plugin over
    what the driver stored, so the flow (set-up, dry runs, clean-up) is exercised; real semantics need a
    real cluster."""
    monkeypatch.setenv("GPUCLOUD_E2E_POLL_SECONDS", "0.1")
    controlled_emulator.emulator.pod_admission = admission_judge.admit_stored
    api = api_client_for_url(controlled_emulator.url)

    hostile_pods.check_hostile_and_ordinary_pods(api, suite.profile_for(api))

    assert controlled_emulator.objects_of("v1", "Namespace") == []
    assert controlled_emulator.objects_of("v1", "Pod") == []  # dry runs only


def test_the_hostile_pod_flow_notices_a_cluster_that_admits_everything(controlled_emulator, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_E2E_POLL_SECONDS", "0.1")
    api = api_client_for_url(controlled_emulator.url)

    with pytest.raises(AssertionError, match="hostile pods the API server admitted"):
        hostile_pods.check_hostile_and_ordinary_pods(api, suite.profile_for(api))
