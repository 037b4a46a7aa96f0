"""Network reachability from a tenant's pod, as the rendered network policies decide it.

Evaluates the NetworkPolicies gpucloud rendered the way the Kubernetes NetworkPolicy semantics define them
(kubernetes.io/docs/concepts/services-networking/network-policies, networking.k8s.io/v1 API reference): a
pod selected by any policy whose types include Egress is isolated for egress, and a connection is allowed
only if some egress rule of some selecting policy allows it (rules and policies add up; an empty `to` or
`ports` matches everything; ipBlock minus its `except`; namespaceSelector and podSelector alone or
together; ports with protocol and endPort); a connection to a pod must also be allowed by that pod's
ingress policies. On Cilium clusters the rendered CiliumNetworkPolicies' explicit denies (egressDeny,
ingressDeny: toCIDRSet, toEndpoints, toEntities) are applied first and win over any allow.

Not modelled: named ports, Services (policies see the pod behind a Service's address), and the CNI itself —
the conformance report says whether the cluster enforces NetworkPolicies at all.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from clusters.render.networkpolicy import DNS_NAMESPACE, DNS_POD_LABELS
from gpucloud.kube.meta import Manifest

from .world import World

NAME_LABEL = "kubernetes.io/metadata.name"  # the API server sets it on every namespace


@dataclass(frozen=True)
class Address:
    """An address outside any pod: the internet, a metadata service, the API server, a node."""

    ip: str
    port: int
    protocol: str = "TCP"
    node: bool = False  # a node's own address (Cilium's `host` / `remote-node` entities)


@dataclass(frozen=True)
class PodAt:
    """A pod in a namespace, on a port."""

    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    port: int = 80
    protocol: str = "TCP"
    ip: str = "10.244.7.7"  # pod addresses lie in the cluster's (private) pod range


Destination = Address | PodAt
KUBE_DNS = PodAt(DNS_NAMESPACE, dict(DNS_POD_LABELS), 53, "UDP", "10.244.0.10")


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str

    def __bool__(self) -> bool:
        return self.allowed


def allowed(src_pod: Manifest, destination: Destination, world: World) -> bool:
    """Whether `src_pod` (a host pod in a tenant's namespace) can open a connection to `destination`."""
    return verdict(src_pod, destination, world).allowed


def verdict(src_pod: Manifest, destination: Destination, world: World) -> Verdict:
    """`allowed`, with the policy or rule that decided it."""
    src_ns = src_pod["metadata"]["namespace"]
    src_labels = src_pod["metadata"].get("labels") or {}
    if world.profile.cilium:
        denied = _cilium_denied(src_ns, src_labels, destination, world)
        if denied:
            return Verdict(False, denied)
    egress = _selecting(world, src_ns, src_labels, "Egress")
    if egress:
        rule = _first_allowing(egress, "egress", "to", destination, world, src_ns)
        if rule is None:
            names = ", ".join(p["metadata"]["name"] for p in egress)
            return Verdict(False, f"egress from {src_ns} is isolated by {names} and no rule allows it")
        reason = f"egress allowed by {rule}"
    else:
        reason = f"no policy isolates egress from {src_ns}"
    if isinstance(destination, PodAt):
        ingress = _selecting(world, destination.namespace, destination.labels, "Ingress")
        if ingress:
            source = PodAt(src_ns, src_labels, destination.port, destination.protocol)
            into = PodAt(destination.namespace, destination.labels, destination.port, destination.protocol)
            rule = _first_allowing(ingress, "ingress", "from", source, world, destination.namespace, into)
            if rule is None:
                names = ", ".join(p["metadata"]["name"] for p in ingress)
                return Verdict(False, f"ingress to {destination.namespace} is isolated by {names}")
            reason += f"; ingress allowed by {rule}"
    return Verdict(True, reason)


# --- NetworkPolicy ----------------------------------------------------------------------------------------


def _types(policy: Manifest) -> list[str]:
    spec = policy["spec"]
    if spec.get("policyTypes"):
        return list(spec["policyTypes"])
    return ["Ingress"] + (["Egress"] if "egress" in spec else [])


def _selecting(world: World, namespace: str, labels: Mapping[str, str], kind: str) -> list[Manifest]:
    return [
        p
        for p in world.objects("NetworkPolicy", namespace)
        if kind in _types(p) and selects(p["spec"].get("podSelector") or {}, labels)
    ]


def _first_allowing(
    policies: list[Manifest],
    direction: str,
    peers_key: str,
    peer: Destination,
    world: World,
    policy_ns: str,
    port_of: Destination | None = None,
) -> str | None:
    """The first rule ("policy rule #n") that allows `peer` on the port of `port_of` (default: the peer's)."""
    target = port_of or peer
    for policy in policies:
        for n, rule in enumerate(policy["spec"].get(direction) or [], 1):
            peers = rule.get(peers_key)
            if peers and not any(_peer_matches(p, peer, world, policy_ns) for p in peers):
                continue
            if rule.get("ports") and not any(_port_matches(p, target) for p in rule["ports"]):
                continue
            return f"{policy['metadata']['name']} rule #{n}"
    return None


def _peer_matches(peer: dict[str, Any], dest: Destination, world: World, policy_ns: str) -> bool:
    if "ipBlock" in peer:
        ip = dest.ip if isinstance(dest, (Address, PodAt)) else ""
        return bool(ip) and in_block(ip, peer["ipBlock"])
    if not isinstance(dest, PodAt):
        return False  # pod and namespace selectors select pods, never outside addresses
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], namespace_labels(world, dest.namespace)):
            return False
    elif dest.namespace != policy_ns:
        return False  # a podSelector alone selects pods of the policy's own namespace
    return selects(peer.get("podSelector") or {}, dest.labels)


def _port_matches(port: dict[str, Any], dest: Destination) -> bool:
    if port.get("protocol", "TCP") != dest.protocol:
        return False
    if "port" not in port:
        return True
    number = port["port"]
    if not isinstance(number, int):
        return False  # named ports are not modelled (gpucloud renders none)
    return bool(number <= dest.port <= port.get("endPort", number))


def in_block(ip: str, block: dict[str, Any]) -> bool:
    address = ipaddress.ip_address(ip)
    network = ipaddress.ip_network(block["cidr"])
    if address.version != network.version or address not in network:
        return False
    return not any(address in ipaddress.ip_network(e) for e in block.get("except") or [])


def selects(selector: dict[str, Any], labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector: every matchLabels pair and every matchExpression hold; {} selects all."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        holds = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not holds:
            return False
    return True


def namespace_labels(world: World, namespace: str) -> dict[str, str]:
    """The namespace's labels as rendered (none for those gpucloud does not render) and its name label."""
    labels: dict[str, str] = {}
    for ns in world.objects("Namespace"):
        if ns["metadata"]["name"] == namespace:
            labels = dict(ns["metadata"].get("labels") or {})
    return {**labels, NAME_LABEL: namespace}


# --- Cilium -----------------------------------------------------------------------------------------------


def _cilium_denied(src_ns: str, src_labels: Mapping[str, str], dest: Destination, world: World) -> str:
    """The CiliumNetworkPolicy deny that drops the connection, or ""."""
    source = _cilium_labels(world, src_ns, src_labels)
    for policy in world.objects("CiliumNetworkPolicy", src_ns):
        spec = policy["spec"]
        if not selects(spec.get("endpointSelector") or {}, source):
            continue
        for rule in spec.get("egressDeny") or []:
            if _cilium_peer(rule, "to", dest, world):
                return f"egress denied by CiliumNetworkPolicy {policy['metadata']['name']}"
    if isinstance(dest, PodAt):
        target = _cilium_labels(world, dest.namespace, dest.labels)
        origin = PodAt(src_ns, src_labels)
        for policy in world.objects("CiliumNetworkPolicy", dest.namespace):
            spec = policy["spec"]
            if not selects(spec.get("endpointSelector") or {}, target):
                continue
            for rule in spec.get("ingressDeny") or []:
                if _cilium_peer(rule, "from", origin, world):
                    return f"ingress denied by CiliumNetworkPolicy {policy['metadata']['name']}"
    return ""


def _cilium_labels(world: World, namespace: str, labels: Mapping[str, str]) -> dict[str, str]:
    """An endpoint's Cilium identity labels (source `k8s:`), with its namespace's."""
    identity = {f"k8s:{k}": v for k, v in labels.items()}
    identity["k8s:io.kubernetes.pod.namespace"] = namespace
    for key, value in namespace_labels(world, namespace).items():
        identity[f"k8s:io.cilium.k8s.namespace.labels.{key}"] = value
    return identity


def _cilium_peer(rule: dict[str, Any], direction: str, peer: Destination, world: World) -> bool:
    for selector in rule.get(f"{direction}Endpoints") or []:
        if isinstance(peer, PodAt) and selects(selector, _cilium_labels(world, peer.namespace, peer.labels)):
            return True
    for cidr in rule.get(f"{direction}CIDRSet") or []:
        if isinstance(peer, Address) and in_block(peer.ip, cidr):
            return True
    return bool(set(rule.get(f"{direction}Entities") or []) & _entities(peer, world))


def _entities(peer: Destination, world: World) -> set[str]:
    if not isinstance(peer, Address):
        return {"cluster"}
    if any(in_block(peer.ip, {"cidr": c}) for c in _networks(world.profile.api_server_cidrs)):
        return {"kube-apiserver", "cluster"}
    return {"host", "remote-node", "cluster"} if peer.node else {"world"}


def _networks(cidrs: Iterable[str]) -> list[str]:
    return [str(ipaddress.ip_network(c, strict=False)) for c in cidrs]
