"""The hostile-tenant suite against a real API server: each pod of clusters/tests/test_hostile_tenants.py is
created as a server-side dry run in a tenant's host namespace, after gpucloud set up tenants of every tier.

Run with `pytest -m cluster tests/cluster` (environment as in test_cluster_e2e.py). A hostile pod must be
refused: by gpucloud's ValidatingAdmissionPolicy with the message the CEL judge predicts for it (the API
server reports the first failed validation), or by another layer that case names (Pod Security, the
ResourceQuota). An ordinary pod must be accepted. Nothing is stored (dry run); the tenants are deleted at
the end.
"""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from typing import Any

import pytest
from kubernetes import client

from clusters.drivers.kubernetes import KubernetesDriver
from clusters.render import ClusterProfile, Manifest
from clusters.spec import TenantSpec
from clusters.tests.test_hostile_tenants import (
    GPU_RESOURCES,
    HOSTILE,
    ORDINARY,
    TENANTS,
    TIERS,
    Case,
    Ctx,
    tenant_of_tier,
)
from tests.cluster.test_cluster_e2e import api_client, profile, reconcile, wait_for
from tests.judges import admission as admission_judge
from tests.judges.world import world_of

__all__ = ["api_client", "profile"]  # the module's fixtures, shared with the end-to-end test

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(
        not os.environ.get("KUBECONFIG"), reason="KUBECONFIG is not set: no cluster to test against"
    ),
]
# What the API server says when a layer other than gpucloud's policies refuses (the case names the layer).
OTHER_LAYERS = {"pod_security": "violates PodSecurity", "quota": "exceeded quota"}


def hostile_tenants(run: str) -> tuple[TenantSpec, ...]:
    """The suite's tenants under this run's names (e2e-<random>-iso, …), so nothing clashes."""
    return tuple(
        dataclasses.replace(
            t,
            slug=f"{run}-{t.slug}",
            public_id=f"ten_{run}{t.slug}",
            namespace=f"tenant-{run}-{t.slug}",
            dedicated_nodes=tuple(f"{run}-{n}" for n in t.dedicated_nodes),
        )
        for t in TENANTS
    )


def dry_run(core: Any, pod: Manifest) -> tuple[int, str]:
    """Status and message of a server-side dry-run create: 201 when admitted."""
    try:
        core.create_namespaced_pod(pod["metadata"]["namespace"], pod, dry_run="All")
    except client.ApiException as exc:
        body = json.loads(exc.body or "{}") if exc.body else {}
        return int(exc.status), str(body.get("message", exc.reason))
    return 201, ""


def runs(cases: tuple[Case, ...], scheduler: str) -> list[tuple[Case, str]]:
    return [(case, tier) for case in cases if scheduler in case.schedulers for tier in case.tiers]


def check_hostile_and_ordinary_pods(api_client: client.ApiClient, profile: ClusterProfile) -> None:
    """Set up the suite's tenants, dry-run every case, delete the tenants."""
    run = f"e2e-{uuid.uuid4().hex[:6]}"
    tenants = hostile_tenants(run)
    profile = dataclasses.replace(profile, gpu_resources=GPU_RESOURCES)
    driver = KubernetesDriver(api_client, profile)
    core: Any = client.CoreV1Api(api_client)
    world = world_of(profile, tenants)
    try:
        assert reconcile(driver, list(tenants)).errors == {}
        admitted: list[str] = []
        for case, tier in runs(HOSTILE, profile.scheduler):
            hostile = case.build(Ctx(tenant_of_tier(tenants, tier), profile.scheduler, tenants))
            # The rule of the first failed validation (the one the API server reports); which resource of a
            # map it names first is the map's iteration order, unordered in CEL, so only the rule is compared.
            rules = [admission_judge.rule_of(m) for m in admission_judge.judge(hostile, world)]
            status, message = dry_run(core, hostile)
            if status == 201:
                admitted.append(f"{case.name} ({tier})")
                continue
            expected = [f"denied request: {rule}: " for rule in rules[:1]] + [
                OTHER_LAYERS[layer] for layer in case.refused_by if layer in OTHER_LAYERS
            ]
            assert status in (403, 422), (case.name, tier, status, message)
            assert any(e in message for e in expected), (case.name, tier, message, expected)
        assert admitted == [], f"hostile pods the API server admitted: {admitted}"
        refused = []
        for case, tier in runs(ORDINARY, profile.scheduler):
            ordinary = case.build(Ctx(tenant_of_tier(tenants, tier), profile.scheduler, tenants))
            status, message = dry_run(core, ordinary)
            if status != 201:
                refused.append(f"{case.name} ({tier}): {message}")
        assert refused == [], refused
    finally:
        for tenant in tenants:
            gone = wait_for(driver, dataclasses.replace(tenant, desired="absent"), "absent", 300)
            assert gone.observations[tenant.slug].phase == "absent"


def test_hostile_pods_are_refused_and_ordinary_ones_admitted(api_client, profile):
    assert set(TIERS) <= {t.trust_tier for t in TENANTS}
    check_hostile_and_ordinary_pods(api_client, profile)
