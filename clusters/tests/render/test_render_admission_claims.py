"""The DRA claims policy (clusters/render/admission.py `render_claims_policy`), judged with
tests/judges/admission.py: a claim or claim template synced from a tenant's vCluster names only the
DeviceClasses of the classes the tenant holds, and a refusal says which class and what is allowed."""

from __future__ import annotations

from typing import Any

from clusters.render import ClusterProfile, admission
from clusters.render.dra import claim_template
from clusters.tests.render.conftest import quota
from tests.judges.admission import Request, review
from tests.judges.world import world_of

DRA = ClusterProfile(dra=True)


def template(
    *classes: str, kind: str = "ResourceClaimTemplate", namespace: str = "tenant-acme"
) -> dict[str, Any]:
    """A claim template (or claim) as vCluster syncs it; one class: `exactly`, more: `firstAvailable`."""
    manifest = claim_template("h200-141gb", "train-x-default-x-acme", namespace)
    (request,) = manifest["spec"]["spec"]["devices"]["requests"]
    if len(classes) == 1:
        request["exactly"]["deviceClassName"] = classes[0]
    else:
        del request["exactly"]
        request["firstAvailable"] = [{"name": f"s{i}", "deviceClassName": c} for i, c in enumerate(classes)]
    if kind == "ResourceClaim":
        manifest["kind"], manifest["spec"] = kind, manifest["spec"]["spec"]
    return manifest


def refusals(
    manifest: dict[str, Any], tenants: list[Any], profile: ClusterProfile = DRA, **request: Any
) -> list[str]:
    return review(manifest, world_of(profile, tenants), Request.for_claim(manifest, **request))


def test_a_template_of_a_class_the_tenant_holds_is_admitted(make_tenant):
    tenants = [make_tenant()]
    assert refusals(template("gpucloud-h200-141gb"), tenants) == []
    assert refusals(template("gpucloud-h200-141gb.mig-1g.18gb"), tenants) == []
    assert refusals(template("gpucloud-h200-141gb", kind="ResourceClaim"), tenants) == []


def test_another_models_class_is_refused_naming_it_and_what_is_allowed(make_tenant):
    tenants = [make_tenant(), make_tenant("bolt", quotas=(quota("l40s-48gb"),))]
    (message,) = refusals(template("gpucloud-l40s-48gb"), tenants)
    assert (
        "device-class: ResourceClaimTemplate train-x-default-x-acme asks for DeviceClass gpucloud-l40s-48gb"
        in message
    )
    assert message.endswith("it may claim: gpucloud-h200-141gb,gpucloud-h200-141gb.mig-1g.18gb")


def test_the_drivers_catch_all_class_is_refused_in_a_claim_and_among_alternatives(make_tenant):
    tenants = [make_tenant()]
    (message,) = refusals(template("gpu.nvidia.com", kind="ResourceClaim"), tenants)
    assert "ResourceClaim train-x-default-x-acme asks for DeviceClass gpu.nvidia.com" in message
    (message,) = refusals(template("gpucloud-h200-141gb", "mig.nvidia.com"), tenants)
    assert "asks for DeviceClass mig.nvidia.com" in message


def test_a_mig_class_its_tier_does_not_allow_is_refused(make_tenant):
    tenants = [make_tenant(trust_tier="isolated")]
    (message,) = refusals(template("gpucloud-h200-141gb.mig-1g.18gb"), tenants)
    assert "tier (isolated) does not allow; it may claim: gpucloud-h200-141gb" in message


def test_a_tenant_holding_no_dra_class_may_claim_nothing(make_tenant):
    tenants = [make_tenant(quotas=(quota("h200-141gb.shared", "nvidia.com/gpu.shared"),))]
    (message,) = refusals(template("gpucloud-h200-141gb"), tenants)
    assert message.endswith("it may claim: <none>")


def test_the_hosts_resource_claim_controller_is_not_judged(make_tenant):
    controller = "system:serviceaccount:kube-system:resource-claim-controller"
    manifest = template("gpu.nvidia.com", kind="ResourceClaim")
    assert refusals(manifest, [make_tenant()], username=controller) == []


def test_no_claims_policy_without_dra(make_tenant):
    names = {o["metadata"]["name"] for o in admission.render_shared([make_tenant()], ClusterProfile())}
    assert admission.CLAIMS_POLICY not in names
    assert "deviceClasses" not in admission.render_params(make_tenant(), ClusterProfile())["data"]
    assert refusals(template("gpu.nvidia.com"), [make_tenant()], ClusterProfile()) == []
