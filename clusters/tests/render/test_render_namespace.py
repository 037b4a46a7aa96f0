from clusters.render.namespace import render_namespace
from gpucloud.kube.meta import MANAGED_BY, TENANT, TRUST_TIER


def test_the_namespace_carries_ownership_and_trust_tier(make_tenant):
    ns = render_namespace(make_tenant("acme", trust_tier="isolated"))
    assert ns["apiVersion"] == "v1"
    assert ns["kind"] == "Namespace"
    assert ns["metadata"]["name"] == "tenant-acme"
    assert ns["metadata"]["labels"] == {MANAGED_BY: "gpucloud", TENANT: "acme", TRUST_TIER: "isolated"}
