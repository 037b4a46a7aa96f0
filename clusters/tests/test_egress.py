"""What a tenant's pods can reach, as the rendered NetworkPolicies (and Cilium's denies) decide it.

For every tier, with and without Cilium: the destinations a GPU workload needs are reachable (DNS, its own
namespace with its vCluster's API server, the internet where the tier allows it), and the ones that must
never be are not (metadata addresses, the host API server, the cluster's private ranges, nodes, other
tenants). The network judge (tests/judges/network.py) evaluates the policies as Kubernetes defines them.
"""

from __future__ import annotations

from typing import Any

import pytest

from clusters.render import ClusterProfile, render_shared, render_tenant
from clusters.render.networkpolicy import SYNCED_BY
from clusters.spec import TenantSpec
from tests.judges.network import KUBE_DNS, Address, Destination, PodAt, allowed, in_block, selects, verdict
from tests.judges.world import World

TIERS = ("isolated", "standard", "trusted")
PRIVATE_API = "10.0.0.10"
PUBLIC_API = "203.0.113.7"  # a managed control plane on a public address

ALWAYS_DENIED: dict[str, Destination] = {
    "metadata": Address("169.254.169.254", 80),
    "metadata (IPv6)": Address("fd00:ec2::254", 80),
    "metadata through NAT64": Address("64:ff9b::a9fe:a9fe", 80),
    "link-local node DNS cache": Address("169.254.20.10", 53, "UDP"),
    "API server": Address(PRIVATE_API, 6443),
    "API server (public address)": Address(PUBLIC_API, 443),
    "a node's kubelet": Address("10.0.1.5", 10250, node=True),
    "the cluster network": Address("10.96.0.1", 443),
    "another tenant's pod": PodAt("tenant-other", {SYNCED_BY: "other", "app": "api"}, 8080, ip="10.244.3.3"),
    "another tenant's vCluster": PodAt("tenant-other", {"app": "vcluster", "release": "other"}, 8443),
    "a system pod other than DNS": PodAt("monitoring", {"app": "prometheus"}, 9090),
    "kube-dns on another port": PodAt("kube-system", {"k8s-app": "kube-dns"}, 9153),
}
NEEDED: dict[str, Destination] = {
    "DNS over UDP": KUBE_DNS,
    "DNS over TCP": PodAt("kube-system", {"k8s-app": "kube-dns"}, 53, "TCP"),
    "its own vCluster's API server": PodAt("tenant-acme", {"app": "vcluster", "release": "acme"}, 8443),
    "its vCluster's CoreDNS": PodAt("tenant-acme", {SYNCED_BY: "acme", "k8s-app": "vcluster-kube-dns"}, 1053),
    "a pod of its own": PodAt("tenant-acme", {SYNCED_BY: "acme", "app": "worker"}, 29500),
}
INTERNET: dict[str, Destination] = {
    "a public address": Address("151.101.1.69", 443),  # a model hub
    "a public IPv6 address": Address("2606:4700::1111", 443),
}


def tenant(slug: str, tier: str) -> TenantSpec:
    return TenantSpec(
        slug=slug,
        public_id=f"ten_{slug}",
        trust_tier=tier,  # type: ignore[arg-type]
        desired="running",
        namespace=f"tenant-{slug}",
    )


def world(tier: str, *, cilium: bool = False, internet: tuple[str, ...] = TIERS) -> World:
    profile = ClusterProfile(
        cilium=cilium, api_server_cidrs=(f"{PRIVATE_API}/32", f"{PUBLIC_API}/32"), internet_egress=internet
    )
    tenants = (tenant("acme", tier), tenant("other", "standard"))
    rendered = render_shared(tenants, profile) + [o for t in tenants for o in render_tenant(t, profile)]
    return World(profile=profile, tenants=tenants, rendered=tuple(rendered))


def synced_pod(**labels: str) -> dict[str, Any]:
    """A pod as vCluster syncs it into the host namespace: its labels, and vCluster's marker."""
    return {
        "metadata": {
            "name": "train-x-default-x-acme",
            "namespace": "tenant-acme",
            "labels": {**labels, SYNCED_BY: "acme"},
        }
    }


CONTROL_PLANE = {
    "metadata": {
        "name": "acme-0",
        "namespace": "tenant-acme",
        "labels": {"app": "vcluster", "release": "acme"},
    }
}
SETTINGS = [(tier, cilium) for tier in TIERS for cilium in (False, True)]
IDS = [f"{tier}{'-cilium' if cilium else ''}" for tier, cilium in SETTINGS]


@pytest.mark.parametrize(("tier", "cilium"), SETTINGS, ids=IDS)
def test_what_a_workload_must_never_reach_is_denied(tier, cilium):
    w = world(tier, cilium=cilium)
    for name, destination in ALWAYS_DENIED.items():
        assert not allowed(synced_pod(app="train"), destination, w), name


@pytest.mark.parametrize(("tier", "cilium"), SETTINGS, ids=IDS)
def test_what_a_gpu_workload_needs_is_allowed(tier, cilium):
    w = world(tier, cilium=cilium)
    for name, destination in {**NEEDED, **INTERNET}.items():
        result = verdict(synced_pod(app="train"), destination, w)
        assert result, f"{name}: {result.reason}"


@pytest.mark.parametrize(("tier", "cilium"), SETTINGS, ids=IDS)
def test_a_tier_without_internet_reaches_only_dns_and_its_own_namespace(tier, cilium):
    w = world(tier, cilium=cilium, internet=tuple(t for t in TIERS if t != tier))
    for name, destination in INTERNET.items():
        assert not allowed(synced_pod(), destination, w), name
    for name, destination in NEEDED.items():
        assert allowed(synced_pod(), destination, w), name


@pytest.mark.parametrize(("tier", "cilium"), SETTINGS, ids=IDS)
def test_only_the_vcluster_control_plane_reaches_the_api_server(tier, cilium):
    w = world(tier, cilium=cilium)
    for ip, port in ((PRIVATE_API, 6443), (PUBLIC_API, 443)):
        assert allowed(CONTROL_PLANE, Address(ip, port), w)
    assert not allowed(CONTROL_PLANE, ALWAYS_DENIED["metadata"], w)  # a tenant's webhook URL, say
    forged = synced_pod(app="vcluster", release="acme")  # the tenant's own labels cannot remove the marker
    assert not allowed(forged, Address(PRIVATE_API, 6443), w)


def test_other_tenants_cannot_reach_this_one_but_system_namespaces_can():
    w = world("standard")
    intruder = {"metadata": {"name": "x", "namespace": "tenant-other", "labels": {SYNCED_BY: "other"}}}
    own_pod = PodAt("tenant-acme", {SYNCED_BY: "acme"}, 8080)
    result = verdict(intruder, own_pod, w)
    assert not result
    assert "egress from tenant-other is isolated" in result.reason
    ingress_controller = {"metadata": {"name": "nginx", "namespace": "ingress-nginx", "labels": {}}}
    assert allowed(ingress_controller, own_pod, w)


def test_the_verdict_names_the_rule_that_decided():
    w = world("standard")
    assert verdict(synced_pod(), KUBE_DNS, w).reason == "egress allowed by gpucloud-egress rule #2"
    denied = verdict(synced_pod(), ALWAYS_DENIED["metadata"], w)
    assert "gpucloud-egress" in denied.reason
    cilium = verdict(synced_pod(), ALWAYS_DENIED["metadata"], world("standard", cilium=True))
    assert cilium.reason == "egress denied by CiliumNetworkPolicy gpucloud-deny-other-tenants"


def test_the_judge_follows_network_policy_semantics():
    assert selects({}, {})
    assert selects(
        {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "DoesNotExist"}]},
        {"a": "1"},
    )
    assert not selects({"matchExpressions": [{"key": "b", "operator": "In", "values": ["2"]}]}, {})
    assert selects({"matchExpressions": [{"key": "b", "operator": "NotIn", "values": ["2"]}]}, {})
    block = {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}
    assert in_block("8.8.8.8", block)
    assert not in_block("10.1.1.1", block)
    assert not in_block("2001:db8::1", block)  # another family is outside the block
    # A namespace no policy isolates lets everything out.
    bare = World(profile=ClusterProfile(), tenants=(), rendered=())
    assert allowed({"metadata": {"name": "p", "namespace": "default"}}, Address("169.254.169.254", 80), bare)
