"""The scheduling judge: can a host pod land on a node, under the host scheduler's node filters?

A port of the kube-scheduler filters that decide which nodes a pod may land on, from kubernetes/kubernetes:
- NodeUnschedulable, `pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go`: a cordoned
  node (`spec.unschedulable`) takes only pods tolerating `node.kubernetes.io/unschedulable:NoSchedule`;
- NodeAffinity, `pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go` with the matching of
  `staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go`: every
  `nodeSelector` label, and one of the `requiredDuringSchedulingIgnoredDuringExecution` terms (In, NotIn,
  Exists, DoesNotExist, Gt, Lt on labels; `matchFields` on `metadata.name`; a term with no requirement
  matches nothing);
- TaintToleration, `pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go`: every `NoSchedule`
  and `NoExecute` taint must be tolerated (`PreferNoSchedule` only scores), a toleration matching as
  `Toleration.ToleratesTaint` in `staging/src/k8s.io/api/core/v1/toleration.go` (empty effect: every effect;
  empty key with Exists: every taint; Equal compares values). The alpha comparison operators (Lt/Gt on
  taint values, gate TaintTolerationComparisonOperators) are off by default and not ported.
KAI's scheduler applies the same predicates (it runs the upstream filter plugins), so the judge holds for
both schedulers gpucloud supports.

A pod with `spec.nodeName` skips the scheduler: only the kubelet's admission applies
(`pkg/kubelet/lifecycle/predicate.go`, `generalFilter`): node affinity and the node selector, and `NoExecute`
taints only, so a `NoSchedule` taint (a dedicated node's, the quarantine's) does not stop it. `judge` then
reports what the kubelet refuses; `breaches` names the taint checks it skipped. Refusing `nodeName` is the
admission layer's work (tests/judges/admission.py).

`judge(pod, world)` returns "unschedulable" messages, one per node naming the taint or selector that keeps
the pod off it, when no node passes the filters; empty when the scheduler would place the pod somewhere.
`breaches(pod, world)` names the nodes the pod could land on that it must not (another tenant's dedicated
node, a quarantined one): a pod the scheduler admits there must be refused by another layer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import yaml

from clusters.spec import TenantSpec
from gpucloud.kube.meta import Manifest

DEDICATED_TO = "gpucloud.io/tenant"  # gpucloud.kube.meta.DEDICATED_TO: label and taint of a dedicated node
QUARANTINE = "gpucloud.io/quarantine"  # health.node_driver.TAINT_KEY
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"  # the taint NodeUnschedulable lets a pod tolerate
FILTERED = ("NoSchedule", "NoExecute")  # the effects TaintToleration filters on


class World(Protocol):
    """What of tests/judges/world.py `World` this judge reads."""

    @property
    def nodes(self) -> tuple[Manifest, ...]: ...

    @property
    def rendered(self) -> tuple[Manifest, ...]: ...

    def tenant_of(self, namespace: str) -> TenantSpec: ...


def judge(pod: Manifest, world: World) -> list[str]:
    """The messages with which the scheduler (or, for a pod naming its node, the kubelet) refuses `pod`;
    empty when it would run somewhere."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return _kubelet(pod, world)
    reasons = {node_name(n): why_not(pod, n) for n in world.nodes}
    if any(reason is None for reason in reasons.values()):
        return []
    if not reasons:
        return ["unschedulable: the host cluster has no nodes"]
    return [f"unschedulable on node {name}: {reason}" for name, reason in sorted(reasons.items())]


def landing(pod: Manifest, world: World) -> list[str]:
    """The nodes the pod may land on: the scheduler's feasible nodes, or the one it names."""
    name = (pod.get("spec") or {}).get("nodeName")
    if name:
        return [] if _kubelet(pod, world) else [name]
    return sorted(node_name(n) for n in world.nodes if why_not(pod, n) is None)


def breaches(pod: Manifest, world: World) -> list[str]:
    """Why the pod could land on nodes it must not (empty when it cannot): a node dedicated to another tenant,
    or a quarantined one; with `spec.nodeName`, that the scheduler's taint checks were skipped."""
    slug = _slug(pod, world)
    out = []
    nodes = {node_name(n): n for n in world.nodes}
    named = (pod.get("spec") or {}).get("nodeName")
    for name in landing(pod, world):
        reason = forbidden(nodes[name], slug)
        if reason is None:
            continue
        if named:
            reason += " (spec.nodeName skips the scheduler, so its NoSchedule taints were not checked)"
        out.append(f"pod may land on node {name}: {reason}")
    return out


def forbidden(node: Manifest, slug: str | None) -> str | None:
    """Why a pod of tenant `slug` must not land on `node`, or None."""
    owner = (node["metadata"].get("labels") or {}).get(DEDICATED_TO)
    owner = owner or next((t.get("value") for t in _taints(node) if t.get("key") == DEDICATED_TO), None)
    if owner and owner != slug:
        return f"it is dedicated to tenant {owner}"
    quarantine = next((t for t in _taints(node) if t.get("key") == QUARANTINE), None)
    if quarantine is not None:
        return f"it is quarantined ({QUARANTINE}={quarantine.get('value', '')})"
    return None


# --- the filters ---------------------------------------------------------------------------------------


def why_not(pod: Manifest, node: Manifest) -> str | None:
    """Why the scheduler filters `node` out for `pod` (the first failing filter, in the default profile's
    order: NodeUnschedulable, NodeAffinity, TaintToleration), or None when the node passes."""
    spec = pod.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    if (node.get("spec") or {}).get("unschedulable"):
        cordon = {"key": UNSCHEDULABLE, "effect": "NoSchedule"}
        if not any(tolerates(t, cordon) for t in tolerations):
            return "node(s) were unschedulable (spec.unschedulable, a cordon)"
    affinity = node_affinity_mismatch(pod, node)
    if affinity is not None:
        return affinity
    taint = untolerated(_taints(node), tolerations, FILTERED)
    if taint is not None:
        return f"untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}} ({taint.get('effect')})"
    return None


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """`Toleration.ToleratesTaint` (staging/src/k8s.io/api/core/v1/toleration.go)."""
    effect, key = toleration.get("effect") or "", toleration.get("key") or ""
    if effect and effect != taint.get("effect"):
        return False
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def untolerated(
    taints: Iterable[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]], effects: Sequence[str]
) -> Mapping[str, Any] | None:
    """`FindMatchingUntoleratedTaint` (component-helpers/scheduling/corev1/helpers.go) for these effects."""
    for taint in taints:
        if taint.get("effect") in effects and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def node_affinity_mismatch(pod: Manifest, node: Manifest) -> str | None:
    """Why the pod's node selector or required node affinity rejects the node, or None (NodeAffinity)."""
    labels = node["metadata"].get("labels") or {}
    spec = pod.get("spec") or {}
    for key, value in sorted((spec.get("nodeSelector") or {}).items()):
        if labels.get(key) != value:
            return f"didn't match the pod's node selector {key}={value}"
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is None:
        return None
    terms = required.get("nodeSelectorTerms") or []
    if not any(_term_matches(term, node) for term in terms):
        return f"didn't match the pod's required node affinity {terms}"
    return None


def _term_matches(term: Mapping[str, Any], node: Manifest) -> bool:
    """One node selector term: all its requirements hold; a term without any matches nothing."""
    expressions, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not expressions and not fields:
        return False
    labels = node["metadata"].get("labels") or {}
    return all(_requirement(r, labels) for r in expressions) and all(
        _requirement(r, {"metadata.name": node_name(node)}) for r in fields
    )


def _requirement(requirement: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator = requirement.get("key", ""), requirement.get("operator", "")
    values = list(requirement.get("values") or [])
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        try:
            have, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def _kubelet(pod: Manifest, world: World) -> list[str]:
    """The kubelet's admission of a pod bound by `spec.nodeName`: the node exists, the node selector and
    required affinity match, and NoExecute taints are tolerated (NoSchedule ones are not looked at)."""
    name = pod["spec"]["nodeName"]
    node = next((n for n in world.nodes if node_name(n) == name), None)
    if node is None:
        return [f"unschedulable: spec.nodeName {name} names no node of the host cluster"]
    affinity = node_affinity_mismatch(pod, node)
    if affinity is not None:
        return [f"refused by the kubelet of node {name}: {affinity}"]
    taint = untolerated(_taints(node), (pod.get("spec") or {}).get("tolerations") or [], ("NoExecute",))
    if taint is not None:
        key = taint.get("key")
        return [f"refused by the kubelet of node {name}: untolerated taint {{{key}}} (NoExecute)"]
    return []


# --- what vCluster makes of a tenant's pod ------------------------------------------------------------


def synced(pod: Manifest, world: World) -> Manifest:
    """The host pod vCluster's syncer creates from a tenant's pod in its host namespace: the tolerations of
    `sync.toHost.pods.enforceTolerations` appended, and, for a pod without `nodeName`, the labels of
    `sync.fromHost.nodes.selector.labels` set in its node selector (loft-sh/vcluster
    pkg/controllers/resources/pods/syncer.go, SyncToHost: "ensure tolerations", "ensure node selector"),
    as the tenant's rendered HelmRelease values say."""
    namespace = pod["metadata"]["namespace"]
    values = _vcluster_values(world, namespace)
    host = {**pod, "spec": dict(pod.get("spec") or {})}
    spec = host["spec"]
    sync = values.get("sync") or {}
    enforced = (sync.get("toHost") or {}).get("pods", {}).get("enforceTolerations") or []
    spec["tolerations"] = [*(spec.get("tolerations") or []), *(_parse_toleration(t) for t in enforced)]
    selector = (sync.get("fromHost") or {}).get("nodes", {}).get("selector", {})
    labels = selector.get("labels") or {}
    if labels and not spec.get("nodeName"):
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **labels}
    return host


def _parse_toleration(text: str) -> dict[str, str]:
    """vCluster's toleration syntax (loft-sh/vcluster pkg/util/toleration/toleration.go): `key=value:Effect`
    (Equal), `key:Effect` (Exists), `key=value`, `key`, `*` (tolerate everything)."""
    if text == "*":
        return {"operator": "Exists"}
    head, _, effect = text.partition(":")
    key, equals, value = head.partition("=")
    if effect:
        return {"key": key, "operator": "Equal" if equals else "Exists", "value": value, "effect": effect}
    return {"key": key, "value": value} if equals else {"key": key}


def _vcluster_values(world: World, namespace: str) -> dict[str, Any]:
    """The tenant's vcluster.yaml: its HelmRelease's values, or its VirtualClusterInstance's (platform)."""
    for manifest in world.rendered:
        if manifest["kind"] == "HelmRelease" and manifest["metadata"].get("namespace") == namespace:
            values: dict[str, Any] = manifest["spec"]["values"]
            return values
        instance = manifest["kind"] == "VirtualClusterInstance"
        if instance and manifest["spec"]["clusterRef"].get("namespace") == namespace:
            loaded: dict[str, Any] = yaml.safe_load(manifest["spec"]["template"]["helmRelease"]["values"])
            return loaded
    raise KeyError(f"no vCluster rendered for namespace {namespace!r}")


def _slug(pod: Manifest, world: World) -> str | None:
    try:
        return world.tenant_of(pod["metadata"].get("namespace", "")).slug
    except KeyError:
        return None


def _taints(node: Manifest) -> list[dict[str, Any]]:
    return list((node.get("spec") or {}).get("taints") or [])


def node_name(node: Manifest) -> str:
    return str(node["metadata"]["name"])
