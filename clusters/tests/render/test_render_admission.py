"""The admission policies, bindings and per-tenant params (clusters/render/admission.py)."""

from __future__ import annotations

import copy
from collections.abc import Callable

import kubernetes_validate
import pytest
from kubernetes_validate.utils import ValidationError

from clusters.render import Manifest, admission, render_shared, render_tenant
from clusters.render.kinds import kinds_for
from clusters.render.profile import ClusterProfile
from clusters.spec import TenantSpec
from clusters.tests.render.conftest import MIG, quota
from gpucloud.kube import kinds as k
from tests.judges.admission import _compiled

KUBERNETES_VERSIONS = ("1.32", "1.33", "1.34")
HAMI = quota(
    "h200-141gb.hami-25",
    "nvidia.com/gpu",
    per_unit=(("nvidia.com/gpumem", 36096), ("nvidia.com/gpucores", 25)),
)
SHARED_GPU = quota("h200-141gb.shared", "nvidia.com/gpu.shared")
PROFILE = ClusterProfile(gpu_resources=("nvidia.com/gpu", "nvidia.com/mig-1g.18gb", "nvidia.com/gpu.shared"))


def _admission_objects(tenants: list[TenantSpec], profile: ClusterProfile) -> list[Manifest]:
    objects = admission.render_shared(tenants, profile)
    return objects + [admission.render_params(t, profile) for t in tenants]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_policies_bindings_and_params_are_valid_kubernetes_objects(make_tenant, version: str) -> None:
    tenants = [make_tenant("a", trust_tier=tier) for tier in admission.TIERS]
    for scheduler in ("kueue", "kai"):
        profile = ClusterProfile(scheduler=scheduler, gpu_resources=PROFILE.gpu_resources)
        objects = _admission_objects(
            [make_tenant(t.trust_tier, trust_tier=t.trust_tier) for t in tenants], profile
        )
        assert {o["kind"] for o in objects} == {
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "ConfigMap",
        }
        for manifest in objects:
            kubernetes_validate.validate(manifest, version, strict=True)


def test_the_strict_validation_would_see_a_misspelt_field(make_tenant) -> None:
    binding = admission.render_binding("standard")
    broken = copy.deepcopy(binding)
    broken["spec"]["paramRef"]["parameterNotFoundActoin"] = "Deny"
    with pytest.raises(ValidationError):
        kubernetes_validate.validate(broken, "1.34", strict=True)


def test_every_expression_compiles_with_standard_cel_only() -> None:
    """The judge declares no Kubernetes CEL library: a call to one (split, quantity, …) would not compile."""
    for level in ("restricted", "baseline"):
        policy = admission.render_policy("isolated", ClusterProfile(pod_security=(("isolated", level),)))
        spec = policy["spec"]
        expressions = [c["expression"] for c in spec["matchConditions"]]
        expressions += [v["expression"] for v in spec["variables"]]
        expressions += [e for v in spec["validations"] for e in (v["expression"], v["messageExpression"])]
        for expression in expressions:
            _compiled(expression)
    with pytest.raises(RuntimeError, match="undeclared reference to 'split'"):
        _compiled("params.data.allowedResources.split(',').size() > 0")


def test_one_policy_and_binding_per_tier_present_policies_first(make_tenant) -> None:
    tenants = [make_tenant("a", trust_tier="isolated"), make_tenant("b", trust_tier="trusted")]
    objects = admission.render_shared(tenants, PROFILE)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ValidatingAdmissionPolicy", "gpucloud-pods-isolated"),
        ("ValidatingAdmissionPolicy", "gpucloud-pods-trusted"),
        ("ValidatingAdmissionPolicyBinding", "gpucloud-pods-isolated"),
        ("ValidatingAdmissionPolicyBinding", "gpucloud-pods-trusted"),
    ]
    assert all(o["metadata"]["labels"]["gpucloud.io/tenant"] == "gpucloud.shared" for o in objects)
    absent = make_tenant("c", trust_tier="standard", desired="absent")
    assert "gpucloud-pods-standard" not in {
        o["metadata"]["name"] for o in render_shared([*tenants, absent], PROFILE)
    }


def test_the_binding_selects_managed_namespaces_of_its_tier_with_their_own_params() -> None:
    spec = admission.render_binding("isolated")["spec"]
    assert spec == {
        "policyName": "gpucloud-pods-isolated",
        "paramRef": {"name": "gpucloud-admission", "parameterNotFoundAction": "Deny"},
        "validationActions": ["Deny"],
        "matchResources": {
            "namespaceSelector": {
                "matchLabels": {
                    "gpucloud.io/trust-tier": "isolated",
                    "app.kubernetes.io/managed-by": "gpucloud",
                }
            }
        },
    }
    policy = admission.render_policy("isolated", PROFILE)["spec"]
    assert policy["failurePolicy"] == "Fail"
    assert policy["paramKind"] == {"apiVersion": "v1", "kind": "ConfigMap"}
    assert policy["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE", "UPDATE"]


def test_params_name_the_tenant_its_queue_and_what_it_may_ask_for(make_tenant) -> None:
    tenant = make_tenant("acme", trust_tier="standard", quotas=(quota(), MIG))
    params = admission.render_params(tenant, PROFILE)
    assert params["metadata"]["namespace"] == "tenant-acme"
    assert params["metadata"]["labels"]["gpucloud.io/tenant"] == "acme"
    assert params["data"] == {
        "tenant": "acme",
        "tier": "standard",
        "scheduler": "kueue",
        "queue": "default",
        "schedulerName": "",
        "gpuResources": "nvidia.com/gpu,nvidia.com/gpu.shared,nvidia.com/mig-1g.18gb",
        "allowedResources": "nvidia.com/gpu,nvidia.com/mig-1g.18gb",
    }
    kai = admission.render_params(tenant, ClusterProfile(scheduler="kai"))["data"]
    assert (kai["queue"], kai["schedulerName"], kai["gpuResources"]) == ("tenant-acme", "kai-scheduler", "")


@pytest.mark.parametrize(
    ("tier", "allowed"),
    [
        ("isolated", "nvidia.com/gpu"),
        ("standard", "nvidia.com/gpu,nvidia.com/mig-1g.18gb"),
        (
            "trusted",
            "nvidia.com/gpu,nvidia.com/gpu.shared,nvidia.com/gpucores,nvidia.com/gpumem,nvidia.com/mig-1g.18gb",
        ),
    ],
)
def test_a_tier_never_allows_what_it_may_not_hold_even_with_a_quota(
    make_tenant: Callable[..., TenantSpec], tier: str, allowed: str
) -> None:
    tenant = make_tenant("acme", trust_tier=tier, quotas=(quota(), MIG, HAMI, SHARED_GPU))
    assert admission.render_params(tenant, PROFILE)["data"]["allowedResources"] == allowed


def test_the_tier_kinds_are_the_ones_tenants_apply() -> None:
    from tenants.tiers import KINDS

    assert {
        str(tier): tuple(str(kind) for kind in kinds) for tier, kinds in KINDS.items()
    } == admission.TIER_KINDS


def test_capabilities_follow_the_tiers_pod_security_level() -> None:
    profile = ClusterProfile(pod_security=(("isolated", "restricted"), ("trusted", "baseline")))
    isolated = admission.render_policy("isolated", profile)["spec"]["validations"]
    trusted = admission.render_policy("trusted", profile)["spec"]["validations"]
    capability = next(v for v in isolated if "'capabilities: '" in v["messageExpression"])
    assert "['NET_BIND_SERVICE']" in capability["expression"]
    capability = next(v for v in trusted if "'capabilities: '" in v["messageExpression"])
    assert "'SYS_CHROOT'" in capability["expression"]
    assert "'SYS_ADMIN'" not in capability["expression"]
    privileged = ClusterProfile(pod_security=(("trusted", "privileged"),))
    assert not any(
        "'capabilities: '" in v["messageExpression"]
        for v in admission.render_policy("trusted", privileged)["spec"]["validations"]
    )


def test_the_tenant_renders_its_params_right_after_its_namespace(make_tenant) -> None:
    objects = render_tenant(make_tenant("acme"), PROFILE)
    assert [o["kind"] for o in objects[:2]] == ["Namespace", "ConfigMap"]


def test_params_come_after_namespaces_and_bindings_after_policies_in_apply_order() -> None:
    for profile in (ClusterProfile(), ClusterProfile(scheduler="kai", dra=True)):
        kinds = kinds_for(profile)
        assert kinds.index(k.NAMESPACE) < kinds.index(k.ADMISSION_PARAMS)
        assert kinds.index(k.VALIDATING_ADMISSION_POLICY) < kinds.index(k.VALIDATING_ADMISSION_POLICY_BINDING)
    assert k.ADMISSION_PARAMS.selector == f"{admission.COMPONENT}={admission.COMPONENT_VALUE}"


def test_an_unknown_pod_security_level_is_refused_naming_the_levels() -> None:
    with pytest.raises(ValueError, match="unknown Pod Security level 'Restricted': choose one of privileged"):
        admission.render_policy("isolated", ClusterProfile(pod_security=(("isolated", "Restricted"),)))
