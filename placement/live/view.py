"""The live view of a Kubernetes host cluster: its GPU pods as `fleet.Pod` rows, from a list and a watch.

A :class:`LiveView` is the sink the host cluster's pod feed (`placement.extender.feed.ClusterFeed`, the feed
the scheduler extender runs on too) hands every list and every watch event to. It writes only what
changed: a pod bound to a GPU node gets a row (its devices, tenant, class, phase and times); a later version
updates the phase and the times; a finished or deleted pod's row is closed with its finish and kept.

One writer (`placement.live.lease`): a view made with a lease writes only while it holds it — taken at each
list, renewed with each saved position; a view whose lease another process took stands down (`active` is
False) until its next list takes it again. The extender's feed and the Celery pass each run a view this way,
so one watch feeds the view.

The watermark, `PodWatch.synced_at`: every pod event up to it is applied — when a list was asked for, then
the time each event or BOOKMARK arrived (in order) — saved with the resourceVersion after a batch of events
(`SAVE_EVENTS`, `SAVE_SECONDS`), never before the rows it covers.

Level, not edge (docs/placement.md, "The live view"): a list is the whole truth. Rows the list does not
name, still open, were deleted while no watch was running (a lost watch, a restarted worker), and are
closed at the list's time, so no time is dropped; a pod the watch already closed is never closed again,
and a replayed event finds its row as it is and writes nothing, so nothing is counted twice. Rows are keyed
by the pod's uid (a name that comes back is a new pod).

Which GPUs of its node a pod holds: the ``gpucloud.io/gpu-index`` annotation where a device plugin writes
it, or for a DRA pod the devices allocated to its ResourceClaims (`placement.live.claims`, looked up in the
feed's `ClaimStore`); otherwise the view takes the lowest free ones (a MIG instance: the first free instance
of its profile in the node's layout as the partition pass recorded it) — the count per node and class is
exact, the index a stand-in until DCGM names the pod's GPU.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from fleet.models import Gpu, GpuClass, HostCluster, Node, NodePartition, Pod, PodWatch
from placement.engine.errors import EngineError
from placement.engine.mig import profile
from placement.extender.pods import BadRequest
from placement.live import claims as dra
from placement.live.lease import Lease
from placement.live.pods import PodFacts, facts
from tenants.models import TenantCluster

log = logging.getLogger(__name__)
MILLI = 1000
CLOSED_KEPT = 10_000
Key = tuple[str, str, str]  # namespace, name, uid
SAVE_EVENTS = 1000  # the position (and the watermark) is saved after this many events at most...
SAVE_SECONDS = 5.0  # ... or this many seconds, whichever comes first


class ClaimLookup(Protocol):
    """The host cluster's ResourceClaims as the feed keeps them (`placement.live.claims.ClaimStore`)."""

    def get(self, namespace: str, name: str, *, fetch: bool) -> Mapping[str, Any] | None: ...


@dataclass
class _Node:
    """A GPU node as the view places pods on it: its GPUs and what the open rows hold of them."""

    row: Node
    model: str  # catalog slug of its GPUs
    uuids: dict[int, str]  # GPU index -> UUID
    layouts: list[list[str]]  # MIG layout per GPU index ([] = not partitioned), from the partition pass
    milli: dict[int, int] = field(default_factory=lambda: defaultdict(int))  # index -> milli held
    instances: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))  # index -> MIG slots
    in_use: dict[int, list[str]] = field(default_factory=dict)  # index -> the layout its MIG pods run in

    def hold(self, pod: Pod, index: dict[str, int], sign: int = 1) -> None:
        for uuid in pod.gpu_uuids:
            i = index[uuid]
            if pod.gpu_instance_id is not None:
                (self.instances[i].add if sign > 0 else self.instances[i].discard)(pod.gpu_instance_id)
                self.in_use[i] = list(pod.mig_layout)
            else:
                self.milli[i] += sign * pod.gpu_milli


class LiveView:
    """The pods of one Kubernetes host cluster, kept as `fleet.Pod` rows (see the module docstring)."""

    def __init__(
        self,
        host_cluster: HostCluster,
        clock: Callable[[], datetime] = timezone.now,
        *,
        lease: Lease | None = None,
        claims: ClaimLookup | None = None,
    ) -> None:
        self.host_cluster = host_cluster
        self.clock = clock
        self.lease = lease  # None: writes unconditionally (one-off use: tests, benchmarks)
        self.claims = claims  # None: DRA pods get no row
        self.active = lease is None or lease.held  # False: another process writes the view; wait for a list
        self.resource_version = ""
        self.synced: datetime | None = None  # the watermark: every pod event up to this time is applied
        self.events = 0  # since the position was last saved
        self.seen = 0  # since this view was made
        self.writes = 0
        self._saved_at = clock()
        self._open: dict[Key, Pod] = {}
        self._closed: dict[Key, None] = {}  # the rows this view closed last, oldest first
        self._load()

    # --- what the feed hands over -----------------------------------------------------------------

    def listed(
        self, items: Iterable[Mapping[str, Any]], resource_version: str, asked_at: datetime | None = None
    ) -> None:
        """A complete list of the cluster's pods: open and update their rows, close the rows it lacks. With
        a lease, only once it is taken (else another process writes the view: nothing is done). The
        watermark moves to when the list was asked for (`asked_at`, else now): every change before is in
        it."""
        at = self.clock()
        synced = min(asked_at, at) if asked_at is not None else at
        if self.lease is not None:
            self.active = self.lease.take()
            if not self.active:
                return
        self._load()
        seen: set[Key] = set()
        with transaction.atomic():
            _lazy_commit()
            for item in items:
                pod = self._read(item, at, deleted=False, fetch=True)
                if pod is not None:
                    seen.add((pod.namespace, pod.name, pod.uid))
                    self._apply(pod)
            for key in [k for k in self._open if k not in seen]:
                self._close(self._open[key], Pod.Phase.FAILED, at)
            self.resource_version, self.synced = resource_version, synced
            events = F("events") + self.events
            if not self._write(
                resource_version=resource_version, listed_at=at, synced_at=synced, events=events
            ):
                transaction.set_rollback(True)  # taken over meanwhile: the new holder's list stands
                return
        self.events, self._saved_at = 0, at

    def changed(self, kind: str, item: Mapping[str, Any]) -> None:
        """One watch event (ADDED, MODIFIED, DELETED; BOOKMARK only moves the resourceVersion and the
        watermark). Ignored while another process holds the lease."""
        if not self.active or (self.lease is not None and not self.lease.held and not self._write()):
            return
        now = self.clock()
        version = str((item.get("metadata") or {}).get("resourceVersion") or "")
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            pod = self._read(item, now, deleted=kind == "DELETED", fetch=True, fetch_done=True)
            if pod is not None:
                with transaction.atomic():
                    _lazy_commit()
                    self._apply(pod)
        self.events += 1
        self.seen += 1
        self.synced = now  # events arrive in order: every change before this one is applied
        if version:
            self.resource_version = version
        due = self.lease is not None and self.lease.due
        if due or self.events >= SAVE_EVENTS or now - self._saved_at >= timedelta(seconds=SAVE_SECONDS):
            self.save_position()

    def save_position(self) -> None:
        """Keep the resourceVersion a restarted watch resumes from, and the watermark (`synced_at`) with it,
        renewing the lease in the same UPDATE (after a batch of events, not each: a resumed watch replays the
        few events since, and replays write nothing)."""
        if not self.active:
            return
        fields: dict[str, Any] = {
            "resource_version": self.resource_version,
            "events": F("events") + self.events,
        }
        if self.synced is not None:
            fields["synced_at"] = self.synced
        if self._write(**fields):
            self.events = 0
            self._saved_at = self.clock()

    def release(self) -> None:
        """Save the position and give the lease back (the feed stops)."""
        self.save_position()
        if self.lease is not None and self.active:
            self.lease.release()
        self.active = False

    def _write(self, **fields: Any) -> bool:
        """Write these fields of the host cluster's `PodWatch` (renewing the lease, if any); False when the
        lease was lost: the view stops writing until its next list takes it again."""
        if self.lease is not None:
            self.active = self.lease.renew(**fields)
            return self.active
        PodWatch.objects.get_or_create(host_cluster=self.host_cluster)
        PodWatch.objects.filter(host_cluster=self.host_cluster).update(**fields)
        return True

    # --- reading a pod --------------------------------------------------------------------------

    def _read(
        self, item: Mapping[str, Any], at: datetime, *, deleted: bool, fetch: bool, fetch_done: bool = False
    ) -> PodFacts | None:
        """The pod's facts if it holds GPUs on a node of the fleet (else None). A DRA pod's claims are
        fetched when the feed's list lacks them (`fetch`), for a finished pod only from a watch event: a list
        keeps finished pods whose claims are gone, and would ask for each of them every pass."""
        try:
            pod = facts(item, seen=at, deleted=deleted)
        except BadRequest as e:
            log.warning("live view skips a pod it cannot read", extra={"error": str(e)})
            return None
        if not pod.node or pod.node not in self.nodes or not pod.uid:
            return None  # not bound, or on a node that is no GPU node of the fleet
        if pod.devices.any:
            return pod
        if not pod.claims or self.claims is None:
            return None  # no GPU
        key = (pod.namespace, pod.name, pod.uid)
        if key in self._open or key in self._closed:
            return pod  # its row knows its devices already
        fetch = fetch and not deleted and (fetch_done or not pod.done)
        found = [self.claims.get(pod.namespace, name, fetch=fetch) for name in pod.claims]
        held = dra.devices([c for c in found if c is not None], self.nodes[pod.node].model)
        return replace(pod, devices=held) if held.any else None

    # --- writing ------------------------------------------------------------------------------

    def _apply(self, pod: PodFacts) -> None:
        key = (pod.namespace, pod.name, pod.uid)
        row = self._open.get(key)
        if row is None:
            if key in self._closed or self._closed_before(key):
                return  # closed already: a replayed event, or a finished pod listed again
            self._create(pod)
            return
        changed = []
        for attr, value in (
            ("phase", pod.phase),
            ("scheduled_at", pod.scheduled),
            ("started_at", pod.started or row.started_at),
        ):
            if value is not None and getattr(row, attr) != value:
                setattr(row, attr, value)
                changed.append(attr)
        if pod.finished is not None:
            self._close(row, pod.phase, pod.finished)
        elif changed:
            row.save(update_fields=changed)
            self.writes += 1

    def _closed_before(self, key: Key) -> bool:
        namespace, name, uid = key
        rows = Pod.objects.filter(host_cluster=self.host_cluster, namespace=namespace, name=name, uid=uid)
        return rows.exists()

    def _create(self, pod: PodFacts) -> None:
        node = self.nodes[pod.node]
        held = self._devices(node, pod)
        gpu_class = self._class(node, pod)
        if held is None or gpu_class is None:
            return
        uuids, instance, milli, layout = held
        at = self.clock()
        row = Pod.objects.create(
            host_cluster=self.host_cluster,
            tenant_id=self.tenants.get(pod.namespace),
            namespace=pod.namespace,
            name=pod.name,
            uid=pod.uid,
            gpu_class=gpu_class,
            node=node.row,
            gpu_uuids=uuids,
            gpu_instance_id=instance,
            gpu_milli=milli,
            mig_layout=layout,
            phase=pod.phase,
            created_at=pod.created,
            scheduled_at=pod.scheduled,
            started_at=pod.started or at,
            finished_at=pod.finished,
        )
        self.writes += 1
        if pod.finished is None:
            self._open[(pod.namespace, pod.name, pod.uid)] = row
            node.hold(row, self._index)

    def _close(self, row: Pod, phase: str, at: datetime) -> None:
        """End an open row: it gave its GPUs back at `at` (never before it started)."""
        row.phase, row.finished_at = phase, max(at, row.started_at)
        Pod.objects.filter(pk=row.pk, finished_at__isnull=True).update(
            phase=row.phase,
            finished_at=row.finished_at,
            scheduled_at=row.scheduled_at,
            started_at=row.started_at,
        )
        self.writes += 1
        key = (row.namespace, row.name, row.uid)
        self._open.pop(key, None)
        self._closed[key] = None  # its DELETED event follows its Succeeded: no query to know it is closed
        if len(self._closed) > CLOSED_KEPT:
            del self._closed[next(iter(self._closed))]
        node = self.nodes.get(row.node.name)
        if node is not None:
            node.hold(row, self._index, -1)

    # --- where a new pod goes ---------------------------------------------------------------------

    def _devices(self, node: _Node, pod: PodFacts) -> tuple[list[str], int | None, int, list[str]] | None:
        """(GPU UUIDs, MIG instance, milli of each, MIG layout) the pod holds on its node, or None."""
        d = pod.devices
        if d.mig_profile:
            return self._instance(node, pod)
        milli = d.milli if not d.shared else MILLI // int(settings.SHARED_GPU_REPLICAS)
        indexes = [i for i in d.indexes if i in node.uuids]
        if len(indexes) < d.gpus:
            free = sorted(
                (i for i in node.uuids if i not in indexes and not node.instances[i]),
                key=lambda i: (node.milli[i] + milli > MILLI, -node.milli[i] if milli < MILLI else 0, i),
            )
            indexes += free[: d.gpus - len(indexes)]
        if len(indexes) < d.gpus:
            log.warning("live view: a pod holds more GPUs than its node has", extra={"pod": pod.name})
            return None
        return [node.uuids[i] for i in indexes[: d.gpus]], None, milli, []

    def _instance(self, node: _Node, pod: PodFacts) -> tuple[list[str], int | None, int, list[str]] | None:
        wanted = pod.devices.mig_profile
        try:
            found = profile(node.model, wanted)
            compute, count = found.compute, found.max_per_gpu
        except EngineError as e:
            log.warning("live view skips a MIG pod", extra={"pod": pod.name, "error": str(e)})
            return None
        candidates = [i for i in pod.devices.indexes if i in node.uuids] or sorted(node.uuids)
        for i in candidates:
            if node.instances[i]:  # instances run: the GPU keeps their layout
                layout = node.in_use[i]
            elif i < len(node.layouts) and node.layouts[i]:  # as the partition pass recorded it
                layout = node.layouts[i]
            else:
                layout = [wanted] * count
            if node.milli[i]:
                continue  # a whole GPU or shares hold it: not partitioned
            free = [s for s, p in enumerate(layout) if p == wanted and s not in node.instances[i]]
            if free:
                return [node.uuids[i]], free[0], round(MILLI * compute / 7), list(layout)
        log.warning("live view: no free MIG instance for a pod", extra={"pod": pod.name, "profile": wanted})
        return None

    def _class(self, node: _Node, pod: PodFacts) -> GpuClass | None:
        d = pod.devices
        if d.mig_profile:
            name = f"{node.model}.mig-{d.mig_profile}"
        elif d.shared:
            name = f"{node.model}.shared"
        elif d.milli < MILLI and f"{node.model}.hami-{d.milli // 10}" in self.classes:
            name = f"{node.model}.hami-{d.milli // 10}"
        else:
            name = node.model
        found = self.classes.get(name)
        if found is None:
            log.warning("live view: no GPU class for a pod", extra={"pod": pod.name, "class": name})
        return found

    # --- the cluster's rows, read once per list ---------------------------------------------------

    def _load(self) -> None:
        """Nodes with their GPUs and layouts, classes, tenants by namespace, and the open rows."""
        self.classes = {c.name: c for c in GpuClass.objects.select_related("gpu_model")}
        self.tenants = dict(
            TenantCluster.objects.filter(host_cluster=self.host_cluster).values_list("namespace", "tenant_id")
        )
        rows = {n.pk: n for n in Node.objects.filter(host_cluster=self.host_cluster)}
        uuids: dict[int, dict[int, str]] = defaultdict(dict)
        models: dict[int, str] = {}
        for node_id, index, uuid, model in Gpu.objects.filter(
            node__host_cluster=self.host_cluster
        ).values_list("node_id", "index", "uuid", "gpu_model__slug"):
            uuids[node_id][index] = uuid
            models[node_id] = model
        layouts = dict(
            NodePartition.objects.filter(node__host_cluster=self.host_cluster).values_list(
                "node_id", "layouts"
            )
        )
        self.nodes = {
            n.name: _Node(n, models[pk], uuids[pk], list(layouts.get(pk) or []))
            for pk, n in rows.items()
            if pk in models
        }
        self._index = {uuid: i for per in uuids.values() for i, uuid in per.items()}
        self._open = {}
        open_rows = Pod.objects.filter(
            host_cluster=self.host_cluster, finished_at__isnull=True
        ).select_related("node")
        for row in open_rows:
            self._open[(row.namespace, row.name, row.uid)] = row
            if row.node.name in self.nodes:
                self.nodes[row.node.name].hold(row, self._index)


def _lazy_commit() -> None:
    """Commit this transaction without waiting for the disk (PostgreSQL's ``synchronous_commit``, for this
    transaction only). Safe here: the resourceVersion the watch resumes from is committed after the rows it
    covers, and a commit that waits for the disk flushes every earlier one with it; a crash loses at most
    rows whose events came after the kept version, and the resumed watch replays those, writing the same
    rows again."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
