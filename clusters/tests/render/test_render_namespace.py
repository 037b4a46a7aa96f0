from clusters.render import ClusterProfile
from clusters.render.namespace import (
    AUDIT,
    AUDIT_VERSION,
    ENFORCE,
    ENFORCE_VERSION,
    POD_SECURITY_VERSION,
    WARN,
    WARN_VERSION,
    render_namespace,
)
from gpucloud.kube.meta import MANAGED_BY, TENANT, TRUST_TIER


def test_the_namespace_carries_ownership_trust_tier_and_its_pod_security_standard(make_tenant):
    ns = render_namespace(make_tenant("acme", trust_tier="isolated"), ClusterProfile())
    assert ns["apiVersion"] == "v1"
    assert ns["kind"] == "Namespace"
    assert ns["metadata"]["name"] == "tenant-acme"
    assert ns["metadata"]["labels"] == {
        MANAGED_BY: "gpucloud",
        TENANT: "acme",
        TRUST_TIER: "isolated",
        ENFORCE: "restricted",
        ENFORCE_VERSION: POD_SECURITY_VERSION,
        WARN: "restricted",
        WARN_VERSION: "latest",
        AUDIT: "restricted",
        AUDIT_VERSION: "latest",
    }


def test_standard_and_trusted_tenants_get_baseline_by_default(make_tenant):
    for tier in ("standard", "trusted"):
        labels = render_namespace(make_tenant(trust_tier=tier), ClusterProfile())["metadata"]["labels"]
        assert labels[ENFORCE] == "baseline", tier


def test_the_level_follows_the_profile(make_tenant):
    profile = ClusterProfile(pod_security=(("isolated", "restricted"), ("standard", "restricted")))
    labels = render_namespace(make_tenant(trust_tier="standard"), profile)["metadata"]["labels"]
    assert (labels[ENFORCE], labels[WARN], labels[AUDIT]) == ("restricted", "restricted", "restricted")
    labels = render_namespace(make_tenant(trust_tier="trusted"), profile)["metadata"]["labels"]
    assert labels[ENFORCE] == "restricted"  # a tier the profile does not name gets the strictest level
