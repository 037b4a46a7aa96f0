"""Isolation between tenants: nothing in another tenant's namespace may reach this one."""

from __future__ import annotations

from clusters.spec import TenantSpec
from gpucloud.kube.meta import TENANT, Manifest, obj, owned

from .profile import ClusterProfile

NAME = "gpucloud-deny-other-tenants"


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


def render_cilium_network_policy(tenant: TenantSpec) -> Manifest:
    """An explicit deny, which Cilium evaluates before any allow another policy may add."""
    other_tenants = {
        "matchExpressions": [
            {"key": f"k8s:io.cilium.k8s.namespace.labels.{TENANT}", "operator": "Exists"},
            {"key": "k8s:io.kubernetes.pod.namespace", "operator": "NotIn", "values": [tenant.namespace]},
        ]
    }
    spec = {"endpointSelector": {}, "ingressDeny": [{"fromEndpoints": [other_tenants]}]}
    policy = obj("cilium.io/v2", "CiliumNetworkPolicy", NAME, tenant.namespace, spec=spec)
    return owned(policy, tenant.slug)


def render_network_policies(tenant: TenantSpec, profile: ClusterProfile) -> list[Manifest]:
    """The NetworkPolicy, plus a CiliumNetworkPolicy when the cluster serves that CRD."""
    policies = [render_network_policy(tenant)]
    if profile.cilium:
        policies.append(render_cilium_network_policy(tenant))
    return policies
