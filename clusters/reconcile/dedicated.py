"""Dedicated nodes on the cluster: what runs where in, the label and taint `gpucloud.io/tenant=<slug>` out.

Part of every reconcile of a host cluster (docs/kubernetes.md, "Dedicated nodes"). On a Kubernetes host
cluster the pass lists the pods of tenant namespaces (one list) to learn which tenants run on which node,
hands that to the dedication pass (`placement.dedication`, which persists which node is whose), then lists
the nodes (one list) and makes each carry exactly what the rows say: a dedicated node the label and the
`NoSchedule` taint `gpucloud.io/tenant=<slug>`, any other node neither (a returned node, or a label or
taint put or removed by hand: drift, restored here). Writes go through the one node writer
(`gpucloud.kube.nodes`), which keeps every other taint, health's quarantine included. A node already as
desired costs no write. On a simulated host cluster only the rows change.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from fleet.models import HostCluster
from gpucloud.kube import kinds as k
from gpucloud.kube.api import KubeApi
from gpucloud.kube.meta import DEDICATED_TO, Manifest
from gpucloud.kube.nodes import change_node, taint_of, with_taint
from placement.dedication import DedicationOutcome, dedicate_nodes, dedicated_nodes
from placement.engine import EngineError
from tenants.models import Tenant

log = logging.getLogger(__name__)
EFFECT = "NoSchedule"
# Pods that hold nothing any more: a node they sit on is empty for the purpose of returning it.
FINISHED = "status.phase!=Succeeded,status.phase!=Failed"


@dataclass
class NodeDedication:
    """What the pass did: the dedication decided, and node writes on the cluster."""

    outcome: DedicationOutcome
    node_writes: int = 0


def taint(slug: str) -> dict[str, Any]:
    """The taint of a node dedicated to `slug`; its vCluster enforces the matching toleration."""
    return {"key": DEDICATED_TO, "value": slug, "effect": EFFECT}


def occupied(api: KubeApi, host_cluster: HostCluster) -> dict[str, set[str]]:
    """Node name -> slugs of the tenants (of any state: a deleting tenant's pods count) with a pod not
    finished on it, from one list of all pods; pods outside tenant namespaces (DaemonSets) do not count."""
    tenants = Tenant.objects.filter(cluster__host_cluster=host_cluster)
    by_namespace = dict(tenants.values_list("cluster__namespace", "slug"))
    pods = api.get("/api/v1/pods", {"fieldSelector": FINISHED}).get("items") or []
    out: dict[str, set[str]] = defaultdict(set)
    for pod in pods:
        slug = by_namespace.get(pod["metadata"].get("namespace", ""))
        node = (pod.get("spec") or {}).get("nodeName")
        # The selector leaves finished pods out on the server; checked here too, as it costs nothing.
        if slug and node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            out[node].add(slug)
    return dict(out)


def desired_patch(node: Manifest, slug: str | None) -> dict[str, Any]:
    """The merge patch making `node` carry the dedication to `slug` (None: none); {} when it does."""
    labels = node["metadata"].get("labels") or {}
    patch: dict[str, Any] = {}
    if labels.get(DEDICATED_TO) != slug:
        patch["metadata"] = {"labels": {DEDICATED_TO: slug}}
    wanted = None if slug is None else taint(slug)
    current = taint_of(node, DEDICATED_TO)
    if (current is None) != (wanted is None) or (
        current is not None and wanted is not None and any(current.get(f) != wanted[f] for f in wanted)
    ):
        patch["spec"] = {"taints": with_taint(node, DEDICATED_TO, wanted)}
    return patch


def apply(api: KubeApi, dedicated: Mapping[str, str]) -> int:
    """Make every node carry the label and taint of its dedication, or none; returns node writes."""
    writes = 0
    for node in api.get(k.NODE.path()).get("items") or []:
        slug = dedicated.get(node["metadata"]["name"])
        if change_node(api, node, partial(desired_patch, slug=slug)):
            writes += 1
    return writes


def dedication_pass(host_cluster: HostCluster, api: KubeApi | None = None) -> NodeDedication:
    """The dedication pass of one reconcile: on the cluster when `api` is given, else on the rows alone."""
    try:
        outcome = dedicate_nodes(host_cluster, None if api is None else occupied(api, host_cluster))
    except EngineError as exc:  # a fleet the engine cannot model (a node mixing GPU models): keep the rows
        log.error("dedication pass failed", extra={"host_cluster": host_cluster.name, "error": str(exc)})
        outcome = DedicationOutcome(host_cluster.name, dedicated=dedicated_nodes(host_cluster))
    return NodeDedication(outcome, 0 if api is None else apply(api, outcome.dedicated))
