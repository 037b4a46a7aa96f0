"""Each built-in object gpucloud renders passes kubernetes-validate's strict schemas of each supported minor.

An outside judge of the rendered Namespaces, ResourceQuotas, LimitRanges, NetworkPolicies, ConfigMaps,
admission policies, DRA objects — whatever `render_tenant` and `render_shared` produce, for every tier, both
schedulers, Cilium on and off, DRA on and off: objects of API groups Kubernetes itself serves are picked by
their apiVersion, so a kind added later is covered without touching this test. Strict mode refuses fields
the schema does not know (a misspelt key is an error, not a silently dropped field).
"""

from __future__ import annotations

import json
from itertools import product
from typing import Any

import kubernetes_validate
import pytest

from clusters.render import ClusterProfile, dra, render_shared, render_tenant
from clusters.render.profile import OidcSettings, Scheduler
from clusters.spec import TenantSpec
from clusters.tests.render.conftest import MIG, quota
from clusters.tests.render.test_render_inference import ENDPOINTS
from tests.tools import KUBERNETES_VERSIONS

# API groups built into Kubernetes ("" is the core group); *.x-k8s.io groups are SIG projects' CRDs.
CORE_GROUPS = {"", "apps", "batch", "policy", "autoscaling"}
# apiVersions served from a later release than the oldest supported one: gpucloud renders them only on
# clusters that serve them (discovery: `ClusterProfile.dra` needs resource.k8s.io/v1).
SERVED_FROM = {"resource.k8s.io/v1": "1.34"}
# SIG projects' CRDs under k8s.io (not x-k8s.io): checked against their upstream CRDs instead
# (clusters/tests/render/test_render_inference.py).
CRD_GROUPS = {"gateway.networking.k8s.io", "inference.networking.k8s.io"}
HAMI = quota(
    "h200-141gb.hami-50",
    "nvidia.com/gpu",
    per_unit=(("nvidia.com/gpumem", 70656), ("nvidia.com/gpucores", 50)),
)


SCHEDULERS: tuple[Scheduler, ...] = ("kueue", "kai")


def builtin(manifest: dict[str, Any]) -> bool:
    group = manifest["apiVersion"].rpartition("/")[0]
    if group in CRD_GROUPS:
        return False
    return group in CORE_GROUPS or (group.endswith(".k8s.io") and not group.endswith("x-k8s.io"))


def tenants() -> list[TenantSpec]:
    made = []
    for slug, tier, quotas in (
        ("iso", "isolated", (quota(),)),
        ("std", "standard", (quota(), MIG)),
        ("tru", "trusted", (quota(), MIG, HAMI)),
        ("idle", "standard", ()),
    ):
        made.append(
            TenantSpec(
                slug=slug,
                public_id=f"ten_{slug}",
                trust_tier=tier,  # type: ignore[arg-type]
                desired="running",
                namespace=f"tenant-{slug}",
                quotas=quotas,
                dedicated_nodes=("gpu-1",) if tier == "isolated" else (),
                endpoints=ENDPOINTS if quotas else (),  # rendered where the profile serves inference
            )
        )
    return made


def profiles() -> list[ClusterProfile]:
    return [
        ClusterProfile(
            scheduler=scheduler,
            cilium=cilium,
            dra=dra,
            api_server_cidrs=("10.0.0.10/32", "fd00::10/128"),
            internet_egress=("standard", "trusted"),
            gpu_resources=(
                "nvidia.com/gpu",
                "nvidia.com/mig-1g.18gb",
                "nvidia.com/gpumem",
                "nvidia.com/gpucores",
            ),
            oidc=OidcSettings(issuer="https://id.example", client_id="gpucloud") if dra else None,
            inference=cilium,  # the Gateway API Inference Extension on half the profiles
        )
        for scheduler, cilium, dra in product(SCHEDULERS, (False, True), (False, True))
    ]


def rendered_builtins() -> dict[str, dict[str, Any]]:
    """Each distinct built-in object over every profile, by its JSON (most repeat from profile to profile)."""
    objects: dict[str, dict[str, Any]] = {}
    for profile in profiles():
        everything = render_shared(tenants(), profile)
        for tenant in tenants():
            everything += render_tenant(tenant, profile)
            if profile.dra:  # applied inside the tenant's vCluster, from its values
                everything += dra.render_claim_templates(tenant)
        for manifest in filter(builtin, everything):
            objects[json.dumps(manifest, sort_keys=True)] = manifest
    return objects


OBJECTS = rendered_builtins()


def test_the_built_in_kinds_gpucloud_renders_are_all_here():
    kinds = {m["kind"] for m in OBJECTS.values()}
    assert {"Namespace", "ResourceQuota", "LimitRange", "NetworkPolicy"} <= kinds
    assert {"DeviceClass", "ResourceClaimTemplate"} <= kinds  # DRA on
    assert {"Deployment", "Service"} <= kinds  # inference endpoints' model servers
    assert not any(m["apiVersion"].startswith(("kueue.x-k8s.io", "cilium.io")) for m in OBJECTS.values())


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_rendered_built_in_object_passes_the_strict_schema(version):
    checked = 0
    for manifest in OBJECTS.values():
        if tuple(map(int, SERVED_FROM.get(manifest["apiVersion"], "1.0").split("."))) > tuple(
            map(int, version.split("."))
        ):
            continue
        where = (
            f"{manifest['kind']} {manifest['metadata'].get('namespace', '')}/{manifest['metadata']['name']}"
        )
        try:
            kubernetes_validate.validate(manifest, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{where} does not validate against Kubernetes {version}: {path}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            pytest.fail(f"{where}: {exc.message}")
        checked += 1
    assert checked >= 20


def test_strict_validation_refuses_a_misspelt_field():
    namespace = next(m for m in OBJECTS.values() if m["kind"] == "NetworkPolicy")
    broken = {**namespace, "spec": {**namespace["spec"], "podSelectr": {}}}
    with pytest.raises(kubernetes_validate.ValidationError, match="podSelectr"):
        kubernetes_validate.validate(broken, KUBERNETES_VERSIONS[0], strict=True)
