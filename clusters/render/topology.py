"""Topology-aware admission from the fleet's topology: the host cluster's levels, and a gang's default.

Both schedulers gpucloud renders for read the same model (docs/kubernetes.md, "Topology-aware admission"): a
`Topology` object lists node-label keys, outermost first, and a workload asks for its pods to share one
domain of a level, as a requirement or a preference.

- **Levels** (`levels`): the host cluster's `topology_levels` as registered (block, rack…), then NVIDIA's
  NVLink domain label `nvidia.com/gpu.clique` where some of its GPU nodes carry it (a clique lives inside one
  rack: a GB200 NVL72 rack is one clique, so it sits between the rack and the host), then
  `kubernetes.io/hostname`, which Kueue requires as the lowest level to keep the levels mutable. A cluster
  registered without levels gets no Topology: the fleet knows no racks there.
- **Kueue** (`kueue.x-k8s.io/v1beta2`, rendered in kueue.py): one `Topology` named `gpucloud`; every
  ResourceFlavor names it (`spec.topologyName`), so a tenant's ClusterQueue is TAS-only and Kueue treats
  every workload topology-aware.
- **KAI** (`kai.scheduler/v1alpha1`): one `Topology` with the same levels, named after them
  (`gpucloud-<hash>`): KAI's CRD makes `spec.levels` immutable, so a change of levels is a new object (and
  the old one pruned) rather than an update the API server would refuse. Only where the cluster serves it.
- **The default: "preferred: rack".** Neither scheduler has a queue-level default topology: Kueue reads
  `kueue.x-k8s.io/podset-preferred-topology` / `podset-required-topology` from the pod template (here the pod:
  vCluster syncs pods), KAI's pod-grouper reads `kai.scheduler/topology` and
  `kai.scheduler/topology-preferred-placement` / `-required-placement` from the pod's top owner (the pod
  itself: gpucloud turns vCluster's owner references off on KAI clusters), and a KAI Queue has no topology
  field. gpucloud cannot edit a tenant's jobs, so a MutatingAdmissionPolicy (`gpucloud-topology-defaults`,
  where the cluster serves one) gives every synced pod that asks for no topology of its own the preference
  for the rack level. A pod that asks for its own (say "required: block") keeps it; on KAI it is given the
  Topology's name if it does not name one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from clusters.spec import TenantSpec
from gpucloud.kube.meta import MANAGED_BY, MANAGER, SHARED, TRUST_TIER, Manifest, obj, owned

from .profile import ClusterProfile

HOSTNAME = "kubernetes.io/hostname"
NVLINK_CLIQUE = "nvidia.com/gpu.clique"  # GPU feature discovery: <cluster UUID>.<clique id> on NVLink nodes
KUEUE_TOPOLOGY = "gpucloud"
KAI_API = "kai.scheduler/v1alpha1"
DEFAULTS = "gpucloud-topology-defaults"
SYNCED_LABEL = "vcluster.loft.sh/managed-by"  # on every host object vCluster syncs from the tenant cluster

# What a pod writes to ask for a topology of its own, per scheduler (kubernetes-sigs/kueue
# apis/kueue/v1beta2/topology_types.go; NVIDIA/KAI-Scheduler pkg/podgrouper/podgrouper/plugins/constants).
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_OWN = (
    KUEUE_PREFERRED,
    "kueue.x-k8s.io/podset-required-topology",
    "kueue.x-k8s.io/podset-unconstrained-topology",
    "kueue.x-k8s.io/podset-slice-required-topology",
    "kueue.x-k8s.io/podset-slice-required-topology-constraints",
)
KAI_TOPOLOGY_KEY = "kai.scheduler/topology"
KAI_PREFERRED = "kai.scheduler/topology-preferred-placement"
KAI_OWN = (KAI_TOPOLOGY_KEY, KAI_PREFERRED, "kai.scheduler/topology-required-placement")


def levels(profile: ClusterProfile) -> list[str]:
    """The node-label keys of the host cluster's topology, outermost first, ending with the hostname;
    empty where it was registered without levels."""
    configured = [level for level in profile.topology_levels if level not in (NVLINK_CLIQUE, HOSTNAME)]
    if not configured:
        return []
    return configured + ([NVLINK_CLIQUE] if profile.nvlink_domains else []) + [HOSTNAME]


def is_rack(level: str) -> bool:
    """A rack label, by the rule the node sync reads a node's rack with (clusters/node_sync.py)."""
    return "topology-rack" in level or "/rack" in level


def default_level(profile: ClusterProfile) -> str:
    """The level gangs prefer by default: the rack; where no level is a rack, the innermost registered one."""
    configured = levels(profile)[:-1]
    configured = [level for level in configured if level != NVLINK_CLIQUE]
    if not configured:
        return ""
    return next((level for level in configured if is_rack(level)), configured[-1])


def kai_topology_name(profile: ClusterProfile) -> str:
    """`gpucloud-<8 hex>` of the levels: KAI's levels are immutable, so other levels make another object."""
    digest = hashlib.sha256(",".join(levels(profile)).encode()).hexdigest()[:8]
    return f"gpucloud-{digest}"


def renders_kai_topology(profile: ClusterProfile) -> bool:
    return profile.scheduler == "kai" and profile.kai_topology and bool(levels(profile))


def render_kai_topology(profile: ClusterProfile) -> Manifest:
    """KAI's Topology: the same levels as Kueue's (KAI needs no hostname level, and takes it)."""
    spec = {"levels": [{"nodeLabel": level} for level in levels(profile)]}
    return owned(obj(KAI_API, "Topology", kai_topology_name(profile), spec=spec), SHARED)


def renders_defaults(profile: ClusterProfile) -> bool:
    """Whether the cluster gets the default-preference policy: a MutatingAdmissionPolicy version is served
    and there is a Topology (of the cluster's scheduler) whose levels the default names."""
    if not (profile.mutating_admission and default_level(profile)):
        return False
    return profile.scheduler == "kueue" or renders_kai_topology(profile)


def own_keys(profile: ClusterProfile) -> tuple[str, ...]:
    """The annotations with which a pod asks for a topology itself: then the policy leaves it alone. On KAI
    only the Topology's name: a pod asking for a placement without naming the Topology gets it named (its
    name, `gpucloud-<hash>`, is nothing a tenant can know), and no preference added."""
    return (KAI_TOPOLOGY_KEY,) if profile.scheduler == "kai" else KUEUE_OWN


def default_annotations(profile: ClusterProfile) -> dict[str, str]:
    """What the policy adds to a pod that asks for no topology of its own."""
    if profile.scheduler == "kai":
        return {KAI_TOPOLOGY_KEY: kai_topology_name(profile), KAI_PREFERRED: default_level(profile)}
    return {KUEUE_PREFERRED: default_level(profile)}


def _literal(annotations: dict[str, str]) -> str:
    return "{" + ", ".join(f"'{key}': '{value}'" for key, value in annotations.items()) + "}"


def _has_any(keys: Sequence[str]) -> str:
    listed = "[" + ", ".join(f"'{key}'" for key in keys) + "]"
    return f"has(object.metadata.annotations) && {listed}.exists(k, k in object.metadata.annotations)"


def annotations_expression(profile: ClusterProfile) -> str:
    """The CEL of the annotations added (plain CEL over `object`: the tests evaluate it). On KAI, a pod that
    asks for a placement of its own gets only the Topology's name."""
    added = default_annotations(profile)
    if profile.scheduler != "kai":
        return _literal(added)
    named = _literal({KAI_TOPOLOGY_KEY: added[KAI_TOPOLOGY_KEY]})
    return f"({_has_any(KAI_OWN[1:])}) ? {named} : {_literal(added)}"


def defaults_expression(profile: ClusterProfile) -> str:
    """The ApplyConfiguration: the annotations merged into the pod's own (server-side-apply semantics)."""
    return f"Object{{metadata: Object.metadata{{annotations: {annotations_expression(profile)}}}}}"


def asks_for_its_own(profile: ClusterProfile) -> str:
    """CEL: the pod names a topology request of its own."""
    return _has_any(own_keys(profile))


def match_conditions(profile: ClusterProfile) -> list[dict[str, str]]:
    return [
        # The pods vCluster synced from the tenant's cluster (it labels them); not the vCluster's own.
        {
            "name": "synced-by-vcluster",
            "expression": f"has(object.metadata.labels) && '{SYNCED_LABEL}' in object.metadata.labels",
        },
        {"name": "asks-for-no-topology", "expression": f"!({asks_for_its_own(profile)})"},
    ]


def render_defaults(profile: ClusterProfile) -> list[Manifest]:
    """The MutatingAdmissionPolicy and binding that give synced tenant pods "preferred: rack" (module
    docstring). `failurePolicy: Ignore`: a preference the policy failed to add must not refuse the pod."""
    api = f"admissionregistration.k8s.io/{profile.mutating_admission}"
    policy: dict[str, Any] = {
        "matchConstraints": {
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
            ]
        },
        "matchConditions": match_conditions(profile),
        "failurePolicy": "Ignore",
        "reinvocationPolicy": "IfNeeded",
        "mutations": [
            {
                "patchType": "ApplyConfiguration",
                "applyConfiguration": {"expression": defaults_expression(profile)},
            }
        ],
    }
    binding = {
        "policyName": DEFAULTS,
        "matchResources": {
            "namespaceSelector": {
                "matchExpressions": [{"key": TRUST_TIER, "operator": "Exists"}],
                "matchLabels": {MANAGED_BY: MANAGER},
            }
        },
    }
    return [
        owned(obj(api, "MutatingAdmissionPolicy", DEFAULTS, spec=policy), SHARED),
        owned(obj(api, "MutatingAdmissionPolicyBinding", DEFAULTS, spec=binding), SHARED),
    ]


def render_shared(tenants: Sequence[TenantSpec], profile: ClusterProfile) -> list[Manifest]:
    """KAI's Topology and the default-preference policy, while some tenant is present (Kueue's Topology is
    rendered with its flavors, kueue.py)."""
    if not tenants:
        return []
    objects = [render_kai_topology(profile)] if renders_kai_topology(profile) else []
    return objects + (render_defaults(profile) if renders_defaults(profile) else [])
