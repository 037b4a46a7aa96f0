"""The tenant reconciler: desired state from the database, applied through the host cluster's driver.

Level-triggered: `reconcile_host_cluster` compares every tenant of a host cluster with what the driver sees
and acts on the difference; the on-change task is the same function limited to one tenant. What the driver
observed is written back only where it differs from what is stored, so an unchanged tenant costs no writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from clusters.drivers.kubernetes import KubernetesDriver, PartialReconcile
from clusters.drivers.simulated import SimulatedDriver
from clusters.models import ObservedWorkload
from clusters.partitions import gpu_pass as partitions
from clusters.profiles import profile_of
from clusters.reconcile.dedicated import dedication_pass
from clusters.spec import (
    Driver,
    EndpointSpec,
    QuotaSpec,
    ReconcileResult,
    TenantObservation,
    TenantSpec,
    WorkloadObservation,
)
from core import audit
from core.audit import Actor
from fleet import catalog
from fleet.clients import api_client_of
from fleet.models import GpuClass, HostCluster, PendingWorkload
from gpucloud.kube.errors import PermanentDriverError, TemporaryDriverError
from gpucloud.locks import exclusive
from gpucloud.observability import (
    RECONCILE_DURATION,
    RECONCILE_LAST_SUCCESS,
    RECONCILE_RUNS,
    RECONCILE_WRITES,
)
from inference.models import InferenceEndpoint
from tenants.models import DedicatedNode, Quota, Tenant, TenantCluster

log = logging.getLogger(__name__)
RECONCILER = Actor.system("reconciler")
TRANSITIONAL = {Tenant.State.PENDING, Tenant.State.PROVISIONING, Tenant.State.DELETING}


def driver_for(host_cluster: HostCluster) -> Driver:
    if host_cluster.driver == HostCluster.Driver.SIMULATED:
        return SimulatedDriver(host_cluster)
    if host_cluster.driver == HostCluster.Driver.KUBERNETES:
        return KubernetesDriver(api_client_of(host_cluster), profile_of(host_cluster))
    raise PermanentDriverError(f"host cluster {host_cluster.name}: no driver called {host_cluster.driver}")


def tenant_spec(
    tenant: Tenant,
    ready: dict[tuple[int, str], int] | None = None,
    dedicated: Mapping[str, str] | None = None,
) -> TenantSpec:
    """The plain desired state of a tenant that a driver works from.

    With `ready` (a host cluster whose partitions gpucloud manages, see
    `clusters.partitions.gpu_pass.ready_units`), a MIG or shared class is guaranteed only as many units as its
    nodes advertise now. `dedicated` (node -> slug, as the dedication pass left it; read from the rows when
    None) names an isolated tenant's nodes, which its vCluster alone syncs and tolerates.
    """

    def guaranteed(q: Quota) -> int:
        if ready is None or q.gpu_class.kind not in partitions.PARTITIONED:
            return q.guaranteed
        return min(q.guaranteed, ready.get((tenant.pk, q.gpu_class.name), 0))

    quotas = tuple(
        QuotaSpec(
            gpu_class=q.gpu_class.name,
            resource_name=q.gpu_class.resource_name,
            node_labels=(("nvidia.com/gpu.product", q.gpu_class.gpu_model.product_label),),
            guaranteed=guaranteed(q),
            per_unit=_per_unit(q.gpu_class),
            burst=q.burst,
            # Asleep, its pods are gone and its whole guarantee is lent to the cohort until it wakes.
            lendable=None if tenant.asleep_since else q.lendable,
            weight=q.weight,
        )
        for q in sorted(tenant.quotas.all(), key=lambda q: q.gpu_class.name)
    )
    return TenantSpec(
        slug=tenant.slug,
        public_id=tenant.public_id,
        trust_tier=tenant.trust_tier,  # type: ignore[arg-type]
        desired=tenant.desired,  # type: ignore[arg-type]
        namespace=tenant.cluster.namespace,
        quotas=quotas,
        sleep_after_inactivity=tenant.sleep_after_inactivity,
        asleep=tenant.asleep_since is not None,
        dedicated_nodes=_dedicated_nodes(tenant, dedicated),
        endpoints=endpoint_specs(tenant),
    )


def endpoint_specs(tenant: Tenant) -> tuple[EndpointSpec, ...]:
    """The tenant's inference endpoints as the renderer needs them (clusters/render/inference.py).

    Until the autoscaler sets replicas from traffic (docs/inference.md, "Not yet"), a running endpoint runs
    its minimum, and one replica when that is 0 (so it serves), a stopped one none."""
    return tuple(
        EndpointSpec(
            name=e.name,
            public_id=e.public_id,
            model_name=e.model_name,
            source_uri=e.source_uri,
            served_model_name=e.served_model_name,
            revision=e.revision,
            engine_args=tuple(e.engine_args),
            gpu_class=e.gpu_class.name,
            resource_name=e.gpu_class.resource_name,
            node_labels=(("nvidia.com/gpu.product", e.gpu_class.gpu_model.product_label),),
            gpus_per_replica=e.gpus_per_replica,
            replicas=max(e.min_replicas, 1) if e.desired == InferenceEndpoint.Desired.RUNNING else 0,
            context_length=e.context_length,
            per_unit=_per_unit(e.gpu_class),
        )
        for e in sorted(tenant.inference_endpoints.all(), key=lambda e: e.name)
    )


def _dedicated_nodes(tenant: Tenant, dedicated: Mapping[str, str] | None) -> tuple[str, ...]:
    """An isolated tenant's dedicated nodes, by name; none for the other tiers (their vClusters sync the
    shared GPU nodes), even while nodes they held as isolated wait to be returned."""
    if tenant.trust_tier != Tenant.TrustTier.ISOLATED:
        return ()
    if dedicated is None:
        names = DedicatedNode.objects.filter(tenant=tenant).values_list("node__name", flat=True)
        return tuple(sorted(names))
    return tuple(sorted(node for node, slug in dedicated.items() if slug == tenant.slug))


@dataclass
class PassOutcome:
    """What one pass did: the driver's result, database writes, and tenants still on their way."""

    host_cluster_id: int
    result: ReconcileResult
    db_writes: int
    transitional: list[int]


def reconcile_host_cluster(host_cluster: HostCluster, tenant_ids: Sequence[int] | None = None) -> PassOutcome:
    """One pass over a host cluster's tenants (all of them, or just `tenant_ids`). Raises LockBusy."""
    started = time.perf_counter()
    with exclusive(f"reconcile:host-cluster:{host_cluster.pk}"):
        tenants = _tenants(host_cluster, tenant_ids)
        result, failure = _drive(host_cluster, tenants, complete=tenant_ids is None)
        db_writes = sum(_write_back(t, result) + _write_workloads(t, result) for t in tenants)
        db_writes += sum(_write_endpoints(t, result) for t in tenants)
    if failure is not None:
        RECONCILE_RUNS.labels(host_cluster.driver, "error").inc()
        raise failure
    RECONCILE_RUNS.labels(host_cluster.driver, "ok").inc()
    RECONCILE_LAST_SUCCESS.labels(host_cluster.name).set_to_current_time()
    RECONCILE_DURATION.labels(host_cluster.driver).observe(time.perf_counter() - started)
    RECONCILE_WRITES.labels("cluster").inc(result.writes)
    RECONCILE_WRITES.labels("database").inc(db_writes)
    transitional = [t.pk for t in tenants if t.state in TRANSITIONAL]
    return PassOutcome(host_cluster.pk, result, db_writes, transitional)


def _drive(
    host_cluster: HostCluster, tenants: list[Tenant], *, complete: bool
) -> tuple[ReconcileResult, TemporaryDriverError | None]:
    """Run the driver; a cluster-wide failure is recorded on the host cluster, never on its tenants.

    A temporary failure is returned so the caller can write back what the pass saw and then retry.
    """
    try:
        driver = driver_for(host_cluster)
    except (
        PermanentDriverError
    ) as exc:  # a stored kubeconfig refused (gpucloud.kubeconfig), an unknown driver
        return _refused(host_cluster, exc)
    try:
        ready = _partition(host_cluster, driver)
        dedicated = _dedicate(host_cluster, driver)
        result = driver.reconcile([tenant_spec(t, ready, dedicated) for t in tenants], complete=complete)
    except PartialReconcile as exc:  # most of the pass worked; keep what it saw, retry the rest
        return exc.result, exc
    except TemporaryDriverError as exc:
        host_cluster.mark(HostCluster.State.UNREACHABLE, str(exc))
        return ReconcileResult(), exc
    except PermanentDriverError as exc:
        return _refused(host_cluster, exc)
    finally:
        getattr(driver, "close", lambda: None)()
    if host_cluster.state != HostCluster.State.READY:
        host_cluster.mark(HostCluster.State.READY, "")
    return result, None


def _refused(host_cluster: HostCluster, exc: PermanentDriverError) -> tuple[ReconcileResult, None]:
    """A permanent failure of the whole cluster: recorded on it, not retried."""
    host_cluster.mark(HostCluster.State.ERROR, str(exc))
    log.error("host cluster refused gpucloud", extra={"host_cluster": host_cluster.name, "error": str(exc)})
    return ReconcileResult(), None


def _per_unit(gpu_class: GpuClass) -> tuple[tuple[str, int], ...]:
    """HAMi classes are quota'd in HAMi's memory and cores too, per unit (one vGPU)."""
    model = catalog.model_by_slug(gpu_class.gpu_model.slug)
    if gpu_class.kind != GpuClass.Kind.FRACTION or model is None:
        return ()
    asks = catalog.hami_resources(model, catalog.hami_percent(gpu_class.name))
    return tuple((name, amount) for name, amount in asks.items() if name != gpu_class.resource_name)


def _partition(host_cluster: HostCluster, driver: Driver) -> dict[tuple[int, str], int] | None:
    """On a Kubernetes host cluster: the conformance check, then the partition pass (MIG layouts,
    time-slicing) where it runs the GPU Operator. Returns the units of partitioned classes each tenant may
    count on (None: quotas are not capped)."""
    if not isinstance(driver, KubernetesDriver):
        return None
    partitions.check_conformance(host_cluster, driver.api)
    # What the check just read (the GPU resource names quotas name, the add-ons) is rendered in this pass.
    driver.profile = profile_of(host_cluster)
    if not partitions.manages_partitions(host_cluster):
        return None
    partitions.run_partition_pass(host_cluster, driver.api)
    return partitions.ready_units(host_cluster)


def _dedicate(host_cluster: HostCluster, driver: Driver) -> dict[str, str]:
    """The dedication pass (`clusters.reconcile.dedicated`): nodes kept, carved and returned for isolated
    tenants, labelled and tainted on a Kubernetes host cluster. Returns node -> slug after it."""
    api = driver.api if isinstance(driver, KubernetesDriver) else None
    outcome = dedication_pass(host_cluster, api).outcome
    return outcome.dedicated


def _tenants(host_cluster: HostCluster, tenant_ids: Sequence[int] | None) -> list[Tenant]:
    tenants = (
        Tenant.objects.filter(cluster__host_cluster=host_cluster)
        .exclude(state=Tenant.State.DELETED)
        .select_related("cluster")
        .prefetch_related("quotas__gpu_class__gpu_model", "inference_endpoints__gpu_class__gpu_model")
    )
    if tenant_ids is not None:
        tenants = tenants.filter(pk__in=tenant_ids)
    return list(tenants)


CLUSTER_STATE = {
    "provisioning": TenantCluster.State.PROVISIONING,
    "ready": TenantCluster.State.READY,
    "suspended": TenantCluster.State.SUSPENDED,
    "deleting": TenantCluster.State.DELETING,
    "failed": TenantCluster.State.FAILED,
}


def _next_tenant_state(tenant: Tenant, phase: str, error: str) -> str | None:
    """The lifecycle step an observation implies, if any."""
    if error and tenant.state in (Tenant.State.PENDING, Tenant.State.PROVISIONING):
        return Tenant.State.FAILED
    if tenant.state == Tenant.State.PENDING and phase in ("provisioning", "ready"):
        return Tenant.State.PROVISIONING
    if tenant.state == Tenant.State.PROVISIONING and phase == "ready":
        return Tenant.State.READY
    if tenant.state == Tenant.State.DELETING and phase == "absent":
        return Tenant.State.DELETED
    return None


def _write_back(tenant: Tenant, result: ReconcileResult) -> int:
    """Store what was observed of one tenant, writing only what changed. Returns rows written."""
    error = result.errors.get(tenant.slug, "")
    observation = result.observations.get(tenant.slug)
    if observation is None and not error:
        return 0
    phase = observation.phase if observation else "failed"
    writes = 0
    with transaction.atomic():
        writes += _write_cluster(tenant, observation, phase, error)
        step = _next_tenant_state(tenant, phase, error)
        # pending → ready happens in two steps when the driver is fast; both are recorded.
        while step is not None:
            before = {"state": tenant.state, "reason": tenant.state_reason}
            tenant.transition(step, reason=error if step == Tenant.State.FAILED else "")
            tenant.save(update_fields=["state", "state_reason", "deleted_at", "updated_at"])
            audit.record(
                RECONCILER,
                f"tenant.{step}",
                object_type="tenant",
                object_id=tenant.public_id,
                tenant=tenant,
                before=before,
                after={"state": step, "reason": tenant.state_reason},
            )
            writes += 2
            step = _next_tenant_state(tenant, phase, error)
    return writes


def _write_workloads(tenant: Tenant, result: ReconcileResult) -> int:
    """Replace the tenant's observed Kueue workloads, and its waiting ones of each scheduler (the queue's
    store), each only when they differ from what is stored; rows written."""
    seen = result.workloads.get(tenant.slug)
    writes = 0
    if seen is not None:  # None: not looked at (simulated driver, KAI, a failed list): keep what is stored
        writes += _write_observed(tenant, seen)
        writes += _write_pending(
            tenant, PendingWorkload.Source.KUEUE, [w for w in seen if w.state == "pending"]
        )
    groups = result.pod_groups.get(tenant.slug)
    if groups is not None:
        writes += _write_pending(tenant, PendingWorkload.Source.KAI, list(groups))
    return writes


def _write_observed(tenant: Tenant, seen: tuple[WorkloadObservation, ...]) -> int:
    fields = ("name", "queue", "state", "gpus", "gpu_class", "created_at")
    stored = set(ObservedWorkload.objects.filter(tenant=tenant).values_list(*fields))
    wanted = {tuple(getattr(w, f) for f in fields) for w in seen}
    if stored == wanted:
        return 0
    with transaction.atomic():
        deleted, _ = ObservedWorkload.objects.filter(tenant=tenant).delete()
        ObservedWorkload.objects.bulk_create(
            ObservedWorkload(tenant=tenant, **dict(zip(fields, row, strict=True))) for row in wanted
        )
    return deleted + len(wanted)


# What a waiting workload's row holds of its observation: a change to any of them rewrites the tenant's rows.
PENDING_FIELDS = (
    "name",
    "queue",
    "gpu_class",
    "pods",
    "gpus",
    "priority",
    "position",
    "message",
    "created_at",
)


def _write_endpoints(tenant: Tenant, result: ReconcileResult) -> int:
    """Store what was observed of the tenant's inference endpoints, only where it changed; rows written."""
    seen = {o.public_id: o for o in result.endpoints.get(tenant.slug, ())}
    writes = 0
    for endpoint in tenant.inference_endpoints.all():
        observed = seen.get(endpoint.public_id)
        if observed is None:
            continue
        values = {
            "replicas_ready": observed.replicas_ready,
            "model_loaded": observed.model_loaded,
            "status_message": observed.message,
        }
        if all(getattr(endpoint, f) == v for f, v in values.items()):
            continue
        # An update by id, not save(): the endpoint's desired fields are its service's to write.
        writes += InferenceEndpoint.objects.filter(pk=endpoint.pk).update(
            **values, observed_at=timezone.now()
        )
    return writes


def _write_pending(tenant: Tenant, source: str, pending: list[WorkloadObservation]) -> int:
    """Replace the tenant's waiting workloads of one scheduler (`fleet.PendingWorkload`, the queue's store)
    when they differ from what is stored; rows written."""
    cluster = tenant.cluster
    if cluster.host_cluster_id is None:
        return 0
    rows = PendingWorkload.objects.filter(tenant=tenant, source=source)
    stored = set(rows.values_list("namespace", *PENDING_FIELDS))
    wanted = {(cluster.namespace, *(getattr(w, f) for f in PENDING_FIELDS)) for w in pending}
    if stored == wanted:
        return 0
    with transaction.atomic():
        deleted, _ = rows.delete()
        PendingWorkload.objects.bulk_create(
            PendingWorkload(
                host_cluster_id=cluster.host_cluster_id,
                tenant=tenant,
                source=source,
                namespace=cluster.namespace,
                **dict(zip(PENDING_FIELDS, (getattr(w, f) for f in PENDING_FIELDS), strict=True)),
            )
            for w in pending
        )
    return deleted + len(pending)


def _cluster_state(tenant: Tenant, phase: str, current: str) -> str:
    if phase == "absent":
        return TenantCluster.State.DELETED if tenant.desired == "absent" else TenantCluster.State.PENDING
    return CLUSTER_STATE.get(phase, current)


def _write_cluster(tenant: Tenant, observation: TenantObservation | None, phase: str, error: str) -> int:
    cluster = tenant.cluster
    wanted = {
        "state": _cluster_state(tenant, phase, cluster.state),
        "endpoint": observation.endpoint if observation else cluster.endpoint,
        "message": error or (observation.message if observation else ""),
    }
    changed = [field for field, value in wanted.items() if getattr(cluster, field) != value]
    if not changed:
        return 0
    for field in changed:
        setattr(cluster, field, wanted[field])
    cluster.observed_at = timezone.now()
    cluster.save(update_fields=[*changed, "observed_at"])
    return 1


def stuck_tenants(older_than_seconds: float) -> list[Tenant]:
    """Tenants in a transitional state for longer than they should be."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    return list(Tenant.objects.filter(state__in=TRANSITIONAL, updated_at__lt=cutoff))
