"""Fixtures for driving the Kubernetes emulator through the real client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from workers.kube.api import api_client_for_url
from workers.kube.emulator import RunningEmulator, start_emulator

ALL_CRDS = ("kueue", "kai", "flux", "vcluster-platform", "cilium", "gpu-operator")


@pytest.fixture
def kube_emulator() -> Iterator[RunningEmulator]:
    """An emulated API server on loopback serving every add-on's CRDs; `.url` is its address."""
    emulator = start_emulator(crds=ALL_CRDS)
    yield emulator
    emulator.stop()


@pytest.fixture
def kube_client(kube_emulator: RunningEmulator):
    """An official `kubernetes.client.ApiClient` pointed at the emulator."""
    api_client = api_client_for_url(kube_emulator.url)
    yield api_client
    api_client.close()
