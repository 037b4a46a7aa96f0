"""The contract between the reconciler and a host cluster.

A driver is told the desired state of tenants on one host cluster and makes the cluster match it. It knows
nothing of Django: the reconciler turns database rows into the plain values below, and turns the
observations a driver returns back into rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

Desired = Literal["running", "suspended", "absent"]
Phase = Literal["provisioning", "ready", "suspended", "deleting", "absent", "failed"]
TrustTier = Literal["isolated", "standard", "trusted"]


@dataclass(frozen=True)
class QuotaSpec:
    """One quota of a tenant, in the units of its GPU class (whole GPUs, MIG slices or shares)."""

    gpu_class: str  # e.g. "h200-141gb", "h200-141gb.mig-1g.18gb", "h200-141gb.shared"
    resource_name: str  # Kubernetes extended resource, e.g. "nvidia.com/gpu", "nvidia.com/mig-1g.18gb"
    node_labels: tuple[tuple[str, str], ...]  # labels selecting the nodes of this class (ResourceFlavor)
    guaranteed: int
    burst: int  # how much more than guaranteed the tenant may borrow (Kueue borrowingLimit)
    lendable: int | None  # how much of the guarantee others may borrow (Kueue lendingLimit); None = all
    weight: int  # fair-share weight
    # Other resources one unit is quota'd in (HAMi: `nvidia.com/gpumem` in MiB, `nvidia.com/gpucores` in %).
    per_unit: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class EndpointSpec:
    """One inference endpoint of a tenant (`inference.InferenceEndpoint`), as the renderer needs it."""

    name: str  # a DNS label, unique in the tenant
    public_id: str  # ie_…: the label selecting its pods, the header the gateway routes by
    model_name: str
    source_uri: str  # hf://, s3://, gs:// or pvc://
    served_model_name: str
    revision: str
    engine_args: tuple[str, ...]
    gpu_class: str
    resource_name: str  # the Kubernetes resource one unit of the class is asked for by
    node_labels: tuple[tuple[str, str], ...]  # labels selecting the class's nodes
    gpus_per_replica: int  # units of the class per replica
    replicas: int  # what the model server runs now (0 when stopped)
    context_length: int | None = None
    per_unit: tuple[tuple[str, int], ...] = ()  # HAMi: memory and cores per unit, as `QuotaSpec.per_unit`


@dataclass(frozen=True)
class TenantSpec:
    """What one tenant should look like on its host cluster."""

    slug: str
    public_id: str
    trust_tier: TrustTier
    desired: Desired
    namespace: str  # host namespace, "tenant-<slug>"
    quotas: tuple[QuotaSpec, ...] = ()
    sleep_after_inactivity: str = ""  # the tenant's own setting; empty = the host cluster's
    asleep: bool = False  # put to sleep by gpucloud after an idle window (see billing/services/idle.py)
    # Isolated tenants: the host nodes dedicated to it (labelled and tainted gpucloud.io/tenant=<slug>).
    dedicated_nodes: tuple[str, ...] = ()
    endpoints: tuple[EndpointSpec, ...] = ()  # inference endpoints (clusters/render/inference.py)


@dataclass(frozen=True)
class TenantObservation:
    """What a driver saw of one tenant after acting on it."""

    slug: str
    phase: Phase
    endpoint: str = ""
    message: str = ""


@dataclass(frozen=True)
class WorkloadObservation:
    """A unit of work in a tenant's queue as the host cluster's scheduler holds it (a Kueue `Workload`, or a
    KAI `PodGroup` not scheduled yet)."""

    name: str
    queue: str
    state: Literal["admitted", "pending", "finished"]
    gpus: int  # GPU units it asks for: pods × GPUs (or MIG slices) per pod, over its pod sets
    gpu_class: str  # the class of its admitted flavor, else of its GPU resource; "" when it asks for none
    created_at: datetime | None
    pods: int = 1  # over its pod sets (Kueue) or its minMember (KAI)
    priority: int = 0  # the scheduler's: Kueue's `spec.priority`, KAI's through its PriorityClass
    message: str = ""  # why it waits, in the scheduler's own words
    position: int | None = None  # 1 is next in its queue, where the scheduler says (Kueue's visibility API)


@dataclass(frozen=True)
class EndpointObservation:
    """What a driver saw of one inference endpoint's model server."""

    public_id: str
    replicas_ready: int
    model_loaded: bool  # a replica is ready, and vLLM is ready only once its model is loaded
    message: str = ""  # why it is not serving, in plain words; empty when every replica is ready


@dataclass
class ReconcileResult:
    """The outcome of one pass over some tenants of a host cluster."""

    observations: dict[str, TenantObservation] = field(default_factory=dict)
    # slug -> every workload seen in the tenant's namespace; a tenant missing here was not looked at.
    workloads: dict[str, tuple[WorkloadObservation, ...]] = field(default_factory=dict)
    # slug -> the tenant's KAI PodGroups not scheduled yet (KAI host clusters); missing: not looked at.
    pod_groups: dict[str, tuple[WorkloadObservation, ...]] = field(default_factory=dict)
    # slug -> its inference endpoints as seen; a tenant missing here was not looked at.
    endpoints: dict[str, tuple[EndpointObservation, ...]] = field(default_factory=dict)
    api_calls: int = 0
    writes: int = 0
    drift_repaired: int = 0
    errors: dict[str, str] = field(default_factory=dict)  # slug -> permanent error message


class Driver(Protocol):
    """Drives tenants on one host cluster towards their desired state.

    `reconcile` must be idempotent: a second call with the same specs against an unchanged cluster makes
    no writes. With `complete=True` the specs are every tenant of the cluster, so objects owned by gpucloud
    for tenants not in the list are pruned; with `complete=False` only the named tenants are touched.
    """

    def reconcile(self, tenants: Sequence[TenantSpec], *, complete: bool) -> ReconcileResult: ...
