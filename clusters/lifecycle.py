"""A host cluster's life after registration: update, cordon and uncordon, drain, retire and un-retire,
delete.

Every door (the API, the portal, `manage.py host_cluster …`, Terraform through the API) calls these; each is
for platform administrators, audited, and refuses with a reason naming what was wrong.

- **Update** (`update_host_cluster`): a rotated kubeconfig is checked like a registration's (the one loader,
  `gpucloud.kubeconfig`) and against the cluster before it replaces the stored one: it must answer, still
  serve the scheduler and vCluster mode, and list at least one of the GPU nodes the fleet has of it (a
  kubeconfig of another cluster is refused). The scheduler changes only on a cluster that serves it and has
  no tenant, whose queues the change would take away. The watched namespace (`watch_tenants`) must serve the
  Tenant custom resources. Region, endpoint base and topology levels go through `fleet.services`.
- **Cordon** (`cordon_host_cluster`): no new tenant is placed there (`tenants.capacity.pick_host_cluster`
  skips it, naming a cordoned one is refused); its tenants run on. **Uncordon** undoes it.
- **Drain** (`drain_host_cluster`): cordons it, then moves each tenant to another host cluster that admits
  all its guarantees, or says why not. A tenant's vCluster cannot be carried over (its etcd is on the source
  cluster), so "moved" means re-provisioned: its tenant cluster is made again on the target, and the next
  complete pass over the source prunes the old one. Hence a tenant with admitted workloads is never moved,
  and a tenant whose tenant cluster is live (ready or suspended: it holds the tenant's objects) is moved only
  with `recreate`, which accepts that it starts empty on the target. Pending, provisioning and failed
  tenants hold nothing yet and move without it.
- **Retire** (`retire_host_cluster`): the end of a cluster that has history. Only an empty one: tenants that
  are not deleted are named (drain first), and so are pods still open on it (the live view or the simulator
  has not seen them end); both 409. It is cordoned and its state becomes `retired`; every row of its history
  stays (nodes, GPUs, pods, health events, the usage ledger, deleted tenants' clusters), so past tenants'
  usage and invoices read as before. From then on it is out of everything live: no periodic pass
  (reconcile, health, live view, simulator, metering: each fan-out starts from
  `fleet.selectors.serving_host_clusters`), no capacity (`fleet.selectors.IN_SERVICE`), no tenant.
  **Un-retire** (`unretire_host_cluster`) puts it back in service, still cordoned: the next passes find out
  whether it answers, and an uncordon lets tenants on. A retired cluster is not uncordoned.
- **Delete** (`delete_host_cluster`): only an empty cluster: tenants that are not deleted are named (drain
  first), and history that refers to it (the usage ledger, deleted tenants' clusters) keeps it: both 409 (the
  second says to retire it instead). Nodes, GPUs, their health history and pods go with it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import ProtectedError
from django.utils import timezone

from clusters.drivers.discovery import ClusterDiscovery, UnsupportedCluster, check_profile, check_scheduler
from clusters.models import ObservedWorkload
from clusters.profiles import profile_of
from clusters.registration import NAME_RE, discover_with, parse_kubeconfig
from core import audit
from core.audit import Actor
from core.declared import refuse_undone_edit
from fleet import services as fleet
from fleet.clients import api_client_of
from fleet.models import HostCluster, Pod
from fleet.selectors import PRESENT
from gpucloud import celery as names
from gpucloud import crypto
from gpucloud.celery import enqueue, enqueue_tenant_reconcile
from gpucloud.errors import Conflict, PermissionDenied, ServiceError, ValidationFailed
from gpucloud.kube.errors import PermanentDriverError
from tenants.capacity import admit, lock_admissions, pick_order
from tenants.models import Quota, Tenant, TenantCluster

LIVE_CLUSTER = (Tenant.State.READY, Tenant.State.SUSPENDED)


def _require_admin(actor: Actor, what: str) -> None:
    if not actor.is_platform_admin:
        raise PermissionDenied(f"{what} needs a platform administrator")


def fingerprint(kubeconfig_ciphertext: str) -> str:
    """A short digest of the stored kubeconfig, for the audit log: says that it changed, never what it is."""
    if not kubeconfig_ciphertext:
        return ""
    return hashlib.sha256(crypto.decrypt(kubeconfig_ciphertext).encode()).hexdigest()[:12]


def snapshot(host_cluster: HostCluster) -> dict[str, Any]:
    """A host cluster as its lifecycle audit rows show it."""
    return {
        "name": host_cluster.name,
        "scheduler": host_cluster.scheduler,
        "tenants_namespace": host_cluster.tenants_namespace,
        "kubeconfig": fingerprint(host_cluster.kubeconfig_ciphertext),
        "cordoned": host_cluster.cordoned,
        "cordon_reason": host_cluster.cordon_reason,
        "state": host_cluster.state,
    }


def _audit(
    actor: Actor, action: str, host_cluster: HostCluster, before: dict[str, Any] | None, **after: Any
) -> None:
    audit.record(
        actor,
        action,
        object_type="host_cluster",
        object_id=host_cluster.public_id,
        before=before,
        after={**snapshot(host_cluster), **after},
    )


def live_tenants(host_cluster: HostCluster) -> list[Tenant]:
    """The host cluster's tenants that are not deleted, by slug."""
    return list(
        Tenant.objects.filter(cluster__host_cluster=host_cluster)
        .exclude(state=Tenant.State.DELETED)
        .order_by("slug")
    )


# --------------------------------------------------------------------------------------------- update


def _check_kubeconfig(host_cluster: HostCluster, found: ClusterDiscovery) -> None:
    """The new kubeconfig must reach this cluster: one of the GPU nodes the fleet has of it, at least."""
    known = set(host_cluster.nodes.filter(PRESENT).values_list("name", flat=True))
    listed = {node.name for node in found.gpu_nodes}
    if known and not known & listed:
        some = ", ".join(sorted(known)[:3])
        raise ValidationFailed.on(
            "kubeconfig",
            f"the kubeconfig reaches a cluster that has none of {host_cluster.name}'s GPU nodes ({some}…): "
            "it is another cluster; register that one separately",
        )


def _check_scheduler(host_cluster: HostCluster, scheduler: str, found: ClusterDiscovery) -> None:
    if scheduler not in HostCluster.Scheduler.values:
        raise ValidationFailed.on("scheduler", f"{scheduler!r} is not a scheduler; use kueue or kai")
    try:
        check_scheduler(found, scheduler)
    except UnsupportedCluster as exc:
        raise ValidationFailed.on("scheduler", str(exc)) from None
    refuse_scheduler_change_under_tenants(host_cluster)


def refuse_scheduler_change_under_tenants(host_cluster: HostCluster) -> None:
    tenants = [t.slug for t in live_tenants(host_cluster)]
    if tenants:
        raise Conflict(
            f"host cluster {host_cluster.name} runs tenants {', '.join(tenants)}, whose queues are "
            f"{host_cluster.scheduler}'s: changing the scheduler would take them away; drain it first",
            errors={"scheduler": [f"drain the tenants first: {', '.join(tenants)}"]},
            tenants=tenants,
        )


def _client(host_cluster: HostCluster, kubeconfig: str | None) -> Any:
    if kubeconfig is not None:
        return parse_kubeconfig(kubeconfig)
    try:
        return api_client_of(host_cluster)
    except PermanentDriverError as exc:
        raise ValidationFailed.on("kubeconfig", f"{exc}; give a new kubeconfig with this change") from None


def update_host_cluster(
    *,
    actor: Actor,
    host_cluster: HostCluster,
    kubeconfig: str | None = None,
    scheduler: str | None = None,
    watch_tenants: str | None = None,
    region: str | None = None,
    endpoint_base: str | None = None,
    topology_levels: list[str] | None = None,
) -> HostCluster:
    """Change a host cluster (see the module docstring); the cluster is asked first, outside any transaction.

    Fields left None are kept. A simulated host cluster takes only region, endpoint base and topology levels.
    """
    _require_admin(actor, "changing a host cluster")
    asks_cluster = (
        kubeconfig is not None
        or (scheduler is not None and scheduler != host_cluster.scheduler)
        or (watch_tenants is not None and watch_tenants != host_cluster.tenants_namespace)
    )
    if asks_cluster and host_cluster.driver != HostCluster.Driver.KUBERNETES:
        raise ValidationFailed.on(
            "driver",
            f"host cluster {host_cluster.name} is simulated: it has no kubeconfig, scheduler or "
            "namespace to change",
        )
    if watch_tenants and not NAME_RE.fullmatch(watch_tenants):
        raise ValidationFailed.on("watch_tenants", f"{watch_tenants!r} is not a namespace name")
    if asks_cluster:
        found = discover_with(_client(host_cluster, kubeconfig), watch_tenants or "")
        if kubeconfig is not None:
            _check_kubeconfig(host_cluster, found)
            try:
                check_profile(found, profile_of(host_cluster))
            except UnsupportedCluster as exc:
                raise ValidationFailed.on(
                    "kubeconfig", f"the cluster it reaches cannot serve this host cluster: {exc}"
                ) from None
        if scheduler is not None and scheduler != host_cluster.scheduler:
            _check_scheduler(host_cluster, scheduler, found)
    return _save_update(
        actor, host_cluster, kubeconfig, scheduler, watch_tenants, region, endpoint_base, topology_levels
    )


@transaction.atomic
def _save_update(
    actor: Actor,
    host_cluster: HostCluster,
    kubeconfig: str | None,
    scheduler: str | None,
    watch_tenants: str | None,
    region: str | None,
    endpoint_base: str | None,
    topology_levels: list[str] | None,
) -> HostCluster:
    host_cluster = fleet.update_host_cluster(
        actor=actor,
        host_cluster=host_cluster,
        region=region,
        endpoint_base=endpoint_base,
        topology_levels=topology_levels,
    )
    host_cluster = HostCluster.objects.select_for_update().get(pk=host_cluster.pk)
    before = snapshot(host_cluster)
    if scheduler is not None and scheduler != host_cluster.scheduler:
        refuse_undone_edit(
            actor,
            "HostCluster",
            host_cluster.name,
            ["scheduler"],
            f"changing host cluster {host_cluster.name}",
        )
        refuse_scheduler_change_under_tenants(host_cluster)  # again under the lock: one placed meanwhile
        host_cluster.scheduler = scheduler
    if watch_tenants is not None:
        host_cluster.tenants_namespace = watch_tenants
    if kubeconfig is not None:
        host_cluster.kubeconfig_ciphertext = crypto.encrypt(kubeconfig)
    if snapshot(host_cluster) == before:
        return host_cluster
    host_cluster.save(update_fields=["scheduler", "tenants_namespace", "kubeconfig_ciphertext"])
    _audit(actor, "host_cluster.update", host_cluster, before)
    host_cluster_id = host_cluster.pk
    transaction.on_commit(lambda: enqueue(names.FULL_PASS, host_cluster_id))
    return host_cluster


# --------------------------------------------------------------------------------------------- cordon


@transaction.atomic
def cordon_host_cluster(*, actor: Actor, host_cluster: HostCluster, reason: str = "") -> HostCluster:
    """Place no new tenant on the host cluster; its tenants keep running. Cordoning again sets the reason."""
    _require_admin(actor, "cordoning a host cluster")
    limit = HostCluster._meta.get_field("cordon_reason").max_length or 0
    if len(reason) > limit:
        raise ValidationFailed.on("reason", f"the reason has {len(reason)} characters; at most {limit}")
    host_cluster = HostCluster.objects.select_for_update().get(pk=host_cluster.pk)
    before = snapshot(host_cluster)
    host_cluster.cordoned_at = host_cluster.cordoned_at or timezone.now()
    host_cluster.cordon_reason = reason
    if snapshot(host_cluster) != before:
        host_cluster.save(update_fields=["cordoned_at", "cordon_reason"])
        _audit(actor, "host_cluster.cordon", host_cluster, before)
    return host_cluster


@transaction.atomic
def uncordon_host_cluster(*, actor: Actor, host_cluster: HostCluster) -> HostCluster:
    """New tenants may be placed on the host cluster again."""
    _require_admin(actor, "uncordoning a host cluster")
    host_cluster = HostCluster.objects.select_for_update().get(pk=host_cluster.pk)
    if host_cluster.retired:
        raise Conflict(
            f"host cluster {host_cluster.name} is retired: un-retire it first, then uncordon it",
            errors={"state": ["retired"]},
        )
    if not host_cluster.cordoned:
        return host_cluster
    before = snapshot(host_cluster)
    host_cluster.cordoned_at, host_cluster.cordon_reason = None, ""
    host_cluster.save(update_fields=["cordoned_at", "cordon_reason"])
    _audit(actor, "host_cluster.uncordon", host_cluster, before)
    return host_cluster


# --------------------------------------------------------------------------------------------- drain


@dataclass
class DrainReport:
    """What a drain did (or, dry, would do): tenants moved (slug → target) and refused (slug → why)."""

    host_cluster: str
    moved: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    dry_run: bool = False

    @property
    def empty(self) -> bool:
        """Whether no tenant is left on the host cluster (but deleted ones, which are history)."""
        return not self.refused

    def as_dict(self) -> dict[str, Any]:
        return {
            "host_cluster": self.host_cluster,
            "moved": dict(sorted(self.moved.items())),
            "refused": dict(sorted(self.refused.items())),
            "dry_run": self.dry_run,
        }


class _DryRun(Exception):
    """Raised to roll a dry drain back once its report is made."""


def _targets(source: HostCluster, target: HostCluster | None) -> list[HostCluster]:
    if target is None:
        return [c for c in pick_order() if c.pk != source.pk]
    if target.pk == source.pk:
        raise ValidationFailed.on("target", f"the target is {source.name} itself; name another host cluster")
    if target.retired:
        raise ValidationFailed.on("target", f"host cluster {target.name} is retired: it takes no tenants")
    if target.cordoned:
        raise ValidationFailed.on(
            "target", f"host cluster {target.name} is cordoned: {target.cordon_reason or 'no reason given'}"
        )
    if target.state != HostCluster.State.READY:
        raise ValidationFailed.on("target", f"host cluster {target.name} is {target.state}, not ready")
    return [target]


def _why_not_movable(tenant: Tenant, recreate: bool) -> str:
    if tenant.state == Tenant.State.DELETING:
        return "it is being deleted; it leaves the host cluster when its deletion finishes"
    running = list(
        ObservedWorkload.objects.filter(tenant=tenant, state=ObservedWorkload.State.ADMITTED)
        .order_by("name")
        .values_list("name", flat=True)
    )
    running += list(
        Pod.objects.filter(tenant=tenant, finished_at__isnull=True)
        .order_by("name")
        .values_list("name", flat=True)
    )
    if running:
        names_ = ", ".join(running[:5]) + ("…" if len(running) > 5 else "")
        return (
            f"{len(running)} workloads run there ({names_}): stop them or let them finish, then drain again"
        )
    if tenant.state in LIVE_CLUSTER and not recreate:
        return (
            f"its tenant cluster is {tenant.state} and holds its objects, which a move cannot carry: drain "
            "with recreate to re-provision it empty on the target"
        )
    return ""


def _admit_on(tenant: Tenant, cluster: TenantCluster, target: HostCluster) -> str:
    """Put the tenant's cluster on `target` and admit all its guarantees there; the reason it cannot, or ''.
    The caller's savepoint undoes the move on a refusal."""
    cluster.host_cluster = target
    cluster.save(update_fields=["host_cluster"])
    # The save waited for a retire holding the target's row (the foreign key's lock): one that committed
    # since the targets were read is seen now.
    if HostCluster.objects.filter(pk=target.pk, state=HostCluster.State.RETIRED).exists():
        return f"{target.name}: it was retired meanwhile"
    try:
        for quota in tenant.quotas.filter(guaranteed__gt=0).select_related("gpu_class__gpu_model"):
            admit(tenant, quota.gpu_class, quota.guaranteed)
    except ServiceError as exc:  # over capacity, a class the target cannot serve (HAMi)
        return f"{target.name}: {exc}"
    return ""


def _move(actor: Actor, tenant: Tenant, source: HostCluster, targets: list[HostCluster]) -> tuple[str, str]:
    """Move one tenant to the first target that admits its guarantees: (target name, '') or ('', why not)."""
    reasons = []
    for target in targets:
        cluster = TenantCluster.objects.select_for_update().get(tenant=tenant)
        with transaction.atomic():  # a savepoint: a target that refuses leaves nothing behind
            why = _admit_on(tenant, cluster, target)
            if why:
                transaction.set_rollback(True)
        if why:
            reasons.append(why)
            continue
        _re_provision(actor, tenant, cluster, source, target)
        return target.name, ""
    if not targets:
        return "", "no other host cluster is ready and uncordoned"
    return "", "no host cluster admits its guarantees: " + "; ".join(reasons)


def _re_provision(
    actor: Actor, tenant: Tenant, cluster: TenantCluster, source: HostCluster, target: HostCluster
) -> None:
    TenantCluster.objects.filter(pk=cluster.pk).update(
        host_cluster=target,
        state=TenantCluster.State.PENDING,
        endpoint="",
        message=f"moved from host cluster {source.name} by a drain",
        observed_at=None,
        access_hash="",
        access_synced_at=None,
        access_attempted_at=None,
        access_message="",
    )
    before = {"host_cluster": source.name, "state": tenant.state}
    if tenant.state == Tenant.State.READY:
        tenant.transition(Tenant.State.PROVISIONING, f"moved to host cluster {target.name}")
    elif tenant.state == Tenant.State.FAILED:
        tenant.transition(Tenant.State.PENDING, f"moved to host cluster {target.name}")
    tenant.save(update_fields=["state", "state_reason", "updated_at"])
    audit.record(
        actor,
        "tenant.move",
        object_type="tenant",
        object_id=tenant.public_id,
        tenant=tenant,
        before=before,
        after={"host_cluster": target.name, "state": tenant.state},
    )
    tenant_id = tenant.pk
    transaction.on_commit(lambda: enqueue_tenant_reconcile(tenant_id))


def drain_host_cluster(
    *,
    actor: Actor,
    host_cluster: HostCluster,
    target: HostCluster | None = None,
    recreate: bool = False,
    dry_run: bool = False,
) -> DrainReport:
    """Cordon the host cluster and move its tenants elsewhere (see the module docstring), to `target` or to
    the first host cluster, in the order new tenants are placed, that admits each one's guarantees. A dry
    run reports the same and keeps nothing."""
    _require_admin(actor, "draining a host cluster")
    report = DrainReport(host_cluster.name, dry_run=dry_run)
    try:
        with transaction.atomic():
            _drain(actor, host_cluster, target, recreate, report)
            if dry_run:
                raise _DryRun
    except _DryRun:
        pass
    return report


def _drain(
    actor: Actor, host_cluster: HostCluster, target: HostCluster | None, recreate: bool, report: DrainReport
) -> None:
    reason = host_cluster.cordon_reason or "drained"
    host_cluster = cordon_host_cluster(actor=actor, host_cluster=host_cluster, reason=reason)
    targets = _targets(host_cluster, target)
    # Locks in the global order (tenants/services/__init__.py): the tenants by id, then every admission row
    # a move may take, by (host cluster, GPU model).
    tenants = list(
        Tenant.objects.select_for_update(of=("self",))
        .filter(cluster__host_cluster=host_cluster)
        .exclude(state=Tenant.State.DELETED)
        .order_by("pk")
    )
    models = set(
        Quota.objects.filter(tenant__in=tenants, guaranteed__gt=0).values_list(
            "gpu_class__gpu_model_id", flat=True
        )
    )
    lock_admissions((t.pk, model) for t in targets for model in models)
    for tenant in sorted(tenants, key=lambda t: t.slug):
        why = _why_not_movable(tenant, recreate)
        moved_to = ""
        if not why:
            moved_to, why = _move(actor, tenant, host_cluster, targets)
        if moved_to:
            report.moved[tenant.slug] = moved_to
        else:
            report.refused[tenant.slug] = why
    _audit(actor, "host_cluster.drain", host_cluster, None, moved=report.moved, refused=report.refused)
    if report.moved:
        host_cluster_id = host_cluster.pk  # the source's complete pass prunes the moved tenants' old objects
        transaction.on_commit(lambda: enqueue(names.FULL_PASS, host_cluster_id))


# --------------------------------------------------------------------------------------------- retire


def _open_pods(host_cluster: HostCluster) -> list[str]:
    """Names (namespace/name) of the pods on the host cluster not seen to end, oldest first."""
    pods = Pod.objects.filter(host_cluster=host_cluster, finished_at__isnull=True)
    pods = pods.order_by("started_at", "pk")
    return [f"{namespace}/{name}" for namespace, name in pods.values_list("namespace", "name")]


def _refuse_while_tenants_live(host_cluster: HostCluster) -> None:
    """A Conflict naming the tenants still on the host cluster, if any (retire and delete both refuse)."""
    tenants = [t.slug for t in live_tenants(host_cluster)]
    if tenants:
        raise Conflict(
            f"host cluster {host_cluster.name} still runs tenants {', '.join(tenants)}: drain it (or delete "
            "them) first",
            errors={"tenants": tenants},
            tenants=tenants,
        )


def _refuse_retire_while_in_use(host_cluster: HostCluster) -> None:
    _refuse_while_tenants_live(host_cluster)
    pods = _open_pods(host_cluster)
    if pods:
        shown = ", ".join(pods[:5]) + ("…" if len(pods) > 5 else "")
        raise Conflict(
            f"host cluster {host_cluster.name} has {len(pods)} pods not seen to end ({shown}): wait until "
            "they finish and the live view records it, then retire it",
            errors={"pods": pods},
            pods=pods,
        )


@transaction.atomic
def retire_host_cluster(*, actor: Actor, host_cluster: HostCluster, reason: str = "") -> HostCluster:
    """Take an empty host cluster out of service for good, keeping its history (see the module docstring).

    It is cordoned with `reason` (none: the cordon reason it has is kept); its status message stays.
    Retiring a retired cluster changes nothing."""
    _require_admin(actor, "retiring a host cluster")
    limit = HostCluster._meta.get_field("cordon_reason").max_length or 0
    if len(reason) > limit:
        raise ValidationFailed.on("reason", f"the reason has {len(reason)} characters; at most {limit}")
    # The row lock orders a retire with every write that points a tenant cluster here (a new tenant, a
    # drain's move): such a write takes the foreign key's share lock on this row. One that came first has
    # committed before this lock is granted, so its tenant is seen below; one that comes after waits for this
    # transaction and then reads the state again (`_admit_on`, `tenants.services.lifecycle`).
    host_cluster = HostCluster.objects.select_for_update().get(pk=host_cluster.pk)
    if host_cluster.retired:
        return host_cluster
    _refuse_retire_while_in_use(host_cluster)
    before = snapshot(host_cluster)
    host_cluster.state = HostCluster.State.RETIRED
    host_cluster.cordoned_at = host_cluster.cordoned_at or timezone.now()
    host_cluster.cordon_reason = reason or host_cluster.cordon_reason
    host_cluster.save(update_fields=["state", "cordoned_at", "cordon_reason"])
    _audit(actor, "host_cluster.retire", host_cluster, before)
    return host_cluster


@transaction.atomic
def unretire_host_cluster(*, actor: Actor, host_cluster: HostCluster) -> HostCluster:
    """Put a retired host cluster back in service, still cordoned: its next passes say whether it answers
    (a Kubernetes one may need a new kubeconfig: `update_host_cluster`), and an uncordon lets tenants on."""
    _require_admin(actor, "un-retiring a host cluster")
    host_cluster = HostCluster.objects.select_for_update().get(pk=host_cluster.pk)
    if not host_cluster.retired:
        return host_cluster
    before = snapshot(host_cluster)
    host_cluster.state = HostCluster.State.READY
    host_cluster.save(update_fields=["state"])
    _audit(actor, "host_cluster.unretire", host_cluster, before)
    host_cluster_id = host_cluster.pk
    transaction.on_commit(lambda: enqueue(names.FULL_PASS, host_cluster_id))
    return host_cluster


# --------------------------------------------------------------------------------------------- delete


def _protected(exc: ProtectedError) -> str:
    counts: dict[str, int] = {}
    for obj in exc.protected_objects:
        label = str(obj._meta.verbose_name_plural)
        counts[label] = counts.get(label, 0) + 1
    return ", ".join(f"{n} {label}" for label, n in sorted(counts.items()))


@transaction.atomic
def delete_host_cluster(*, actor: Actor, host_cluster: HostCluster) -> None:
    """Remove an empty host cluster with its nodes, GPUs and their health history (see the module
    docstring). gpucloud's shared objects on the cluster (its Kueue cohort and flavors, the GPU Operator
    ConfigMaps) are left there: remove them with `kubectl delete -l app.kubernetes.io/managed-by=gpucloud`."""
    _require_admin(actor, "deleting a host cluster")
    refuse_undone_edit(
        actor, "HostCluster", host_cluster.name, None, f"deleting host cluster {host_cluster.name}"
    )
    host_cluster = HostCluster.objects.select_for_update().get(pk=host_cluster.pk)
    _refuse_while_tenants_live(host_cluster)
    before = {**snapshot(host_cluster), "nodes": host_cluster.nodes.count()}
    public_id = host_cluster.public_id
    try:
        with transaction.atomic():
            host_cluster.delete()
    except ProtectedError as exc:
        raise Conflict(
            f"host cluster {host_cluster.name} is referred to by history that must stay: {_protected(exc)}; "
            + ("it stays retired" if host_cluster.retired else "retire it instead"),
            errors={"history": [_protected(exc)]},
        ) from None
    audit.record(actor, "host_cluster.delete", object_type="host_cluster", object_id=public_id, before=before)
