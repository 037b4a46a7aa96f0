"""Isolation between tenants, and what a tenant's pods may reach.

Ingress: nothing in another tenant's namespace may reach this one. Egress: every pod of the namespace is
denied by default and allowed DNS, its own namespace (the vCluster's API server and CoreDNS run there) and,
where the tier allows it, public addresses; never link-local / metadata addresses, the host cluster's API
server, the cluster's private ranges or another tenant's namespace. Only the vCluster's control plane may
reach the host API server (it syncs the tenant's pods there).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from clusters.spec import TenantSpec
from gpucloud.kube.meta import TENANT, Manifest, obj, owned

from .profile import ClusterProfile
from .vcluster import vcluster_name

NAME = "gpucloud-deny-other-tenants"
EGRESS = "gpucloud-egress"
CONTROL_PLANE = "gpucloud-vcluster-control-plane"
DENY_HOST = "gpucloud-deny-host"  # Cilium only: synced pods reach neither the API server nor the nodes

# Link-local (cloud metadata services answer on 169.254.169.254 and fd00:ec2::254, node-local DNS caches and
# other node agents on 169.254.0.0/16) and the IPv6 unique-local range fd00:ec2::254 lies in.
METADATA_CIDRS = ("169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128")
# What "the internet" leaves out: the ranges a cluster network, its nodes, its services and a cloud's own
# endpoints use (RFC 1918, shared address space, loopback, "this network", link-local, unique-local, the
# IPv4-mapped IPv6 range).
PRIVATE_V4 = (
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.168.0.0/16",
)
PRIVATE_V6 = ("::1/128", "::ffff:0:0/96", "fc00::/7", "fe80::/10")
# NAT64 (RFC 6052): on an IPv6-only cluster 64:ff9b::a9fe:a9fe is 169.254.169.254 by another name.
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")

DNS_NAMESPACE = "kube-system"
DNS_POD_LABELS = {"k8s-app": "kube-dns"}  # CoreDNS / kube-dns in kubeadm, EKS, GKE, AKS and k3s
# vCluster marks every pod it syncs to the host with this label (overwriting any the tenant sets), so a
# selector that requires it to be absent can only match the vCluster's own control plane.
SYNCED_BY = "vcluster.loft.sh/managed-by"


def render_network_policy(tenant: TenantSpec) -> Manifest:
    """Allow ingress from the namespace itself and from namespaces that belong to no tenant.

    NetworkPolicies only allow, so "deny other tenants" is written as "allow everyone else": system
    namespaces (ingress controllers, monitoring) carry no `gpucloud.io/tenant` label and stay reachable.
    """
    spec = {
        "podSelector": {},
        "policyTypes": ["Ingress"],
        "ingress": [
            {"from": [{"podSelector": {}}]},
            {
                "from": [
                    {"namespaceSelector": {"matchExpressions": [{"key": TENANT, "operator": "DoesNotExist"}]}}
                ]
            },
        ],
    }
    policy = obj("networking.k8s.io/v1", "NetworkPolicy", NAME, tenant.namespace, spec=spec)
    return owned(policy, tenant.slug)


def render_egress_policy(tenant: TenantSpec, profile: ClusterProfile) -> Manifest:
    """Default-deny egress for every pod of the namespace, with what a GPU workload needs allowed."""
    rules: list[dict[str, Any]] = [
        {"to": [{"podSelector": {}}]},  # its own namespace: its pods, the vCluster API server and CoreDNS
        {
            "to": [
                {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": DNS_NAMESPACE}},
                    "podSelector": {"matchLabels": dict(DNS_POD_LABELS)},
                }
            ],
            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
        },
    ]
    if tenant.trust_tier in profile.internet_egress:
        rules.append({"to": internet(profile)})
    spec = {"podSelector": {}, "policyTypes": ["Egress"], "egress": rules}
    policy = obj("networking.k8s.io/v1", "NetworkPolicy", EGRESS, tenant.namespace, spec=spec)
    return owned(policy, tenant.slug)


def internet(profile: ClusterProfile) -> list[dict[str, Any]]:
    """ipBlock peers for public addresses: everything but private, link-local and the API server's."""
    v4 = list(PRIVATE_V4) + [c for c in profile.api_server_cidrs if _version(c) == 4]
    v6 = list(PRIVATE_V6) + [c for c in profile.api_server_cidrs if _version(c) == 6]
    v6 += [_nat64(cidr) for cidr in v4]
    return [
        {"ipBlock": {"cidr": "0.0.0.0/0", "except": _outermost(v4)}},
        {"ipBlock": {"cidr": "::/0", "except": _outermost(v6)}},
    ]


def render_control_plane_policy(tenant: TenantSpec, profile: ClusterProfile) -> Manifest:
    """The vCluster's control plane may also reach the host API server, where it creates the synced pods.

    Until discovery has found the API server's addresses (`profile.api_server_cidrs`), it may reach any
    address: a vCluster that cannot sync is worse than one whose control plane is not yet fenced in (the
    conformance report says which it is).
    """
    selector = {
        "matchLabels": {"app": "vcluster", "release": vcluster_name(tenant)},
        "matchExpressions": [{"key": SYNCED_BY, "operator": "DoesNotExist"}],
    }
    if profile.api_server_cidrs:
        rules = [{"to": [{"ipBlock": {"cidr": _network(c)}} for c in profile.api_server_cidrs]}]
    else:
        rules = [{}]
    spec = {"podSelector": selector, "policyTypes": ["Egress"], "egress": rules}
    policy = obj("networking.k8s.io/v1", "NetworkPolicy", CONTROL_PLANE, tenant.namespace, spec=spec)
    return owned(policy, tenant.slug)


def render_cilium_network_policies(tenant: TenantSpec) -> list[Manifest]:
    """Explicit denies, which Cilium evaluates before any allow another policy may add.

    Every endpoint of the namespace: no ingress from and no egress to other tenants' endpoints, no egress
    to metadata addresses. Synced pods (the tenant's workloads, never the control plane): no egress to the
    API server or the nodes (`host`: its own node, `remote-node`: the others) whatever their address. The
    control plane: egress to the API server by its Cilium identity, which a NetworkPolicy ipBlock does not
    match on Cilium clusters.
    """
    other_tenants = {
        "matchExpressions": [
            {"key": f"k8s:io.cilium.k8s.namespace.labels.{TENANT}", "operator": "Exists"},
            {"key": "k8s:io.kubernetes.pod.namespace", "operator": "NotIn", "values": [tenant.namespace]},
        ]
    }
    deny = {
        "endpointSelector": {},
        "ingressDeny": [{"fromEndpoints": [other_tenants]}],
        "egressDeny": [
            {"toEndpoints": [other_tenants]},
            {"toCIDRSet": [{"cidr": cidr} for cidr in _metadata_cidrs()]},
        ],
    }
    workloads = {
        "endpointSelector": {"matchExpressions": [{"key": f"k8s:{SYNCED_BY}", "operator": "Exists"}]},
        "egressDeny": [{"toEntities": ["kube-apiserver", "host", "remote-node"]}],
    }
    control_plane = {
        "endpointSelector": {
            "matchLabels": {"k8s:app": "vcluster", "k8s:release": vcluster_name(tenant)},
            "matchExpressions": [{"key": f"k8s:{SYNCED_BY}", "operator": "DoesNotExist"}],
        },
        "egress": [{"toEntities": ["kube-apiserver"]}],
    }
    return [
        owned(obj("cilium.io/v2", "CiliumNetworkPolicy", name, tenant.namespace, spec=spec), tenant.slug)
        for name, spec in ((NAME, deny), (DENY_HOST, workloads), (CONTROL_PLANE, control_plane))
    ]


def render_network_policies(tenant: TenantSpec, profile: ClusterProfile) -> list[Manifest]:
    """The NetworkPolicies, plus CiliumNetworkPolicies when the cluster serves that CRD."""
    policies = [
        render_network_policy(tenant),
        render_egress_policy(tenant, profile),
        render_control_plane_policy(tenant, profile),
    ]
    if profile.cilium:
        policies += render_cilium_network_policies(tenant)
    return policies


def _metadata_cidrs() -> list[str]:
    """The metadata ranges, and the IPv4 ones by their NAT64 names too."""
    cidrs = [_network(cidr) for cidr in METADATA_CIDRS]
    return cidrs + [_nat64(cidr) for cidr in METADATA_CIDRS if _version(cidr) == 4]


def _version(cidr: str) -> int:
    return ipaddress.ip_network(cidr, strict=False).version


def _network(cidr: str) -> str:
    """The CIDR in its canonical form (an address becomes a /32 or /128)."""
    return str(ipaddress.ip_network(cidr, strict=False))


def _nat64(cidr: str) -> str:
    v4 = ipaddress.IPv4Network(cidr, strict=False)
    base = int(NAT64.network_address) + int(v4.network_address)
    return str(ipaddress.IPv6Network((base, 96 + v4.prefixlen)))


def _outermost(cidrs: list[str]) -> list[str]:
    """Sorted, without duplicates or ranges that another one in the list contains."""
    networks = sorted({ipaddress.ip_network(c, strict=False) for c in cidrs}, key=lambda n: (n.prefixlen, n))
    kept: list[Any] = []
    for network in networks:
        if not any(network.subnet_of(outer) for outer in kept):
            kept.append(network)
    return [str(n) for n in sorted(kept)]
