"""The one way gpucloud changes a host Node: read, compute the change, write it conditionally.

Three passes put taints on nodes — health's quarantine (`gpucloud.io/quarantine`, `health.node_driver`),
the MIG reconfiguration cordon (`clusters.drivers.gpu_operator`) and the dedication of nodes to isolated
tenants (`gpucloud.io/tenant`, `clusters.reconcile.dedicated`) — and people or other controllers add their
own. `spec.taints` is a list that a merge patch replaces whole, so a
writer that computed its list from a stale read would drop a taint written in between. Every change here is
a merge patch computed from the node as read and sent with that read's `resourceVersion` as a precondition:
if anything wrote the node meanwhile the API server answers 409, and the change is computed again from a
fresh read (a bounded number of times). Each writer changes only its own keys and keeps every other taint.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gpucloud.kube import kinds as k
from gpucloud.kube.api import Conflict, KubeApi
from gpucloud.kube.errors import TemporaryDriverError
from gpucloud.kube.meta import Manifest

MERGE_PATCH = "application/merge-patch+json"
ROUNDS = 5  # reads and conditional writes of one node before giving up until the next pass

Change = Callable[[Manifest], dict[str, Any]]  # node as read -> merge patch ({} when it is as desired)


class NodeBusy(TemporaryDriverError):
    """A node that kept changing under every conditional write of one pass; the next pass tries again."""


def change_node(api: KubeApi, node: Manifest, change: Change, *, rounds: int = ROUNDS) -> bool:
    """Make `node` (as last read) carry what `change` computes; True when it wrote. A 409 re-reads it."""
    name = node["metadata"]["name"]
    for _ in range(rounds):
        patch = change(node)
        if not patch:
            return False
        patch.setdefault("metadata", {})["resourceVersion"] = node["metadata"]["resourceVersion"]
        try:
            api.request(
                "PATCH", k.NODE.path(name=name), body=patch, content_type=MERGE_PATCH, conditional=True
            )
        except Conflict:
            node = api.get(k.NODE.path(name=name))
            continue
        return True
    raise NodeBusy(f"node {name} changed under each of {rounds} writes; trying again at the next pass")


def taints(node: Manifest) -> list[dict[str, Any]]:
    return list((node.get("spec") or {}).get("taints") or ())


def taint_of(node: Manifest, key: str) -> dict[str, Any] | None:
    return next((t for t in taints(node) if t.get("key") == key), None)


def with_taint(node: Manifest, key: str, wanted: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """The node's taints with the one of `key` set to `wanted` (removed when None), every other taint kept in
    its place; None when that leaves no taint (a merge patch deletes the field)."""
    others: Sequence[dict[str, Any]] = [t for t in taints(node) if t.get("key") != key]
    out = [*others, wanted] if wanted is not None else list(others)
    return out or None
