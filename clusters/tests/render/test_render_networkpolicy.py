import ipaddress

from clusters.render import ClusterProfile
from clusters.render.networkpolicy import (
    CONTROL_PLANE,
    DENY_HOST,
    EGRESS,
    NAME,
    SYNCED_BY,
    render_network_policies,
)
from gpucloud.kube.meta import TENANT

API = ClusterProfile(api_server_cidrs=("203.0.113.7/32", "2001:db8::7/128"))


def inside(inner, outer):
    return inner.network_address in outer and inner.broadcast_address in outer


def by_name(policies, kind="NetworkPolicy"):
    return {p["metadata"]["name"]: p for p in policies if p["kind"] == kind}


def test_it_admits_only_its_own_namespace_and_non_tenant_namespaces(make_tenant):
    policy = by_name(render_network_policies(make_tenant(), ClusterProfile()))[NAME]
    spec = policy["spec"]
    assert spec["podSelector"] == {}
    assert spec["policyTypes"] == ["Ingress"]
    sources = [peer for rule in spec["ingress"] for peer in rule["from"]]
    assert {"podSelector": {}} in sources
    assert {
        "namespaceSelector": {"matchExpressions": [{"key": TENANT, "operator": "DoesNotExist"}]}
    } in sources
    assert all("ipBlock" not in peer for peer in sources)


def test_every_pod_is_default_deny_for_egress_with_dns_and_its_own_namespace_allowed(make_tenant):
    spec = by_name(render_network_policies(make_tenant(), API))[EGRESS]["spec"]
    assert spec["podSelector"] == {}
    assert spec["policyTypes"] == ["Egress"]
    own, dns, _internet = spec["egress"]
    assert own == {"to": [{"podSelector": {}}]}
    (peer,) = dns["to"]
    assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}
    assert peer["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    assert dns["ports"] == [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]


def test_the_internet_leaves_out_private_link_local_and_api_server_addresses(make_tenant):
    spec = by_name(render_network_policies(make_tenant(), API))[EGRESS]["spec"]
    v4, v6 = (peer["ipBlock"] for peer in spec["egress"][2]["to"])
    assert v4["cidr"] == "0.0.0.0/0"
    for cidr in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10"):
        assert cidr in v4["except"]
    assert "203.0.113.7/32" in v4["except"]  # a public API server address
    assert v6["cidr"] == "::/0"
    for cidr in ("fc00::/7", "fe80::/10", "2001:db8::7/128", "64:ff9b::a9fe:0/112"):
        assert cidr in v6["except"]
    for block in (v4, v6):  # each except lies in its cidr, and none inside another (none is redundant)
        outer = ipaddress.ip_network(block["cidr"])
        nets = [ipaddress.ip_network(c) for c in block["except"]]
        assert all(inside(n, outer) for n in nets)
        assert not any(a != b and inside(a, b) for a in nets for b in nets)


def test_a_tier_without_internet_egress_gets_no_internet_rule(make_tenant):
    profile = ClusterProfile(internet_egress=("standard", "trusted"))
    isolated = by_name(render_network_policies(make_tenant(trust_tier="isolated"), profile))[EGRESS]
    assert len(isolated["spec"]["egress"]) == 2
    assert not any("ipBlock" in peer for rule in isolated["spec"]["egress"] for peer in rule["to"])
    standard = by_name(render_network_policies(make_tenant(), profile))[EGRESS]
    assert len(standard["spec"]["egress"]) == 3


def test_only_the_vcluster_control_plane_may_reach_the_api_server(make_tenant):
    spec = by_name(render_network_policies(make_tenant(), API))[CONTROL_PLANE]["spec"]
    assert spec["podSelector"] == {
        "matchLabels": {"app": "vcluster", "release": "acme"},
        "matchExpressions": [{"key": SYNCED_BY, "operator": "DoesNotExist"}],  # never a synced pod
    }
    assert spec["egress"] == [
        {"to": [{"ipBlock": {"cidr": "203.0.113.7/32"}}, {"ipBlock": {"cidr": "2001:db8::7/128"}}]}
    ]
    unknown = by_name(render_network_policies(make_tenant(), ClusterProfile()))[CONTROL_PLANE]["spec"]
    assert unknown["egress"] == [{}]  # not discovered yet: the control plane must still reach it


def test_cilium_clusters_also_get_explicit_denies(make_tenant):
    policies = render_network_policies(make_tenant(), ClusterProfile(cilium=True))
    cilium = by_name(policies, "CiliumNetworkPolicy")
    assert set(cilium) == {NAME, DENY_HOST, CONTROL_PLANE}
    deny = cilium[NAME]["spec"]
    (ingress,) = deny["ingressDeny"]
    expressions = ingress["fromEndpoints"][0]["matchExpressions"]
    assert {
        "key": "k8s:io.kubernetes.pod.namespace",
        "operator": "NotIn",
        "values": ["tenant-acme"],
    } in expressions
    to_tenants, to_metadata = deny["egressDeny"]
    assert to_tenants["toEndpoints"] == ingress["fromEndpoints"]
    assert {"cidr": "169.254.0.0/16"} in to_metadata["toCIDRSet"]
    assert {"cidr": "fd00:ec2::254/128"} in to_metadata["toCIDRSet"]
    assert {"cidr": "64:ff9b::a9fe:0/112"} in to_metadata["toCIDRSet"]  # 169.254.0.0/16 through NAT64
    host = cilium[DENY_HOST]["spec"]
    assert host["endpointSelector"] == {
        "matchExpressions": [{"key": f"k8s:{SYNCED_BY}", "operator": "Exists"}]
    }
    assert host["egressDeny"] == [{"toEntities": ["kube-apiserver", "host", "remote-node"]}]
    assert cilium[CONTROL_PLANE]["spec"]["egress"] == [{"toEntities": ["kube-apiserver"]}]
