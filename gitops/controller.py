"""Tenant and RateCard custom resources, for Argo CD and Flux users (issue 13 §3).

A host cluster registered with `--watch-tenants NAMESPACE` has the `Tenant` and `RateCard` objects of that
namespace (CRDs in `deploy/kubernetes/crds/`, from `gitops.crds`) applied by gpucloud: `manage.py
watch_tenants` lists them, watches them, and sends each through the one apply path (`gitops.apply.apply`,
the services, their validation, admission and audit), then writes what happened to the object's status
through the status subresource, in the shape kstatus (Flux) reads and the Argo CD health check in
docs/gitops.md understands: `observedGeneration`, a `Ready` condition always, `Stalled` only while the spec
cannot be applied, `Reconciling` only while the tenant is being provisioned.

Each object is its own source (`kubernetes:<host cluster>/<namespace>/<Kind>/<name>`): deleting it prunes
exactly what it applied, as the GitOps sync prunes — a tenant is deleted, a rate card withdrawn (deleted, or
retired when issued invoices used it). A finalizer (`gpucloud.io/finalizer`), added before anything is
applied, keeps the object until gpucloud has deleted the tenant. A spec that cannot be applied writes
nothing (one transaction) and answers `Ready=False`, `Stalled=True` with the reason.

Level-triggered, as every reconciler here: each pass lists the objects and reconciles all of them (this also
follows a tenant from provisioning to ready); between passes a watch, resumed from the last
resourceVersion seen, is the shortcut. A 410 Gone (the version was compacted) means list again.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import close_old_connections

from core.audit import Actor
from fleet.clients import api_client_of
from fleet.models import HostCluster
from gitops.apply import apply
from gitops.manifests import API_VERSION, ManifestInvalid, from_bodies
from gitops.models import ManagedObject
from gitops.specs import GONE
from gpucloud.kube.api import Gone, KubeApi, RetryPolicy
from gpucloud.kube.errors import DriverError, TemporaryDriverError
from gpucloud.kube.kinds import RATE_CARD_RESOURCE, TENANT_RESOURCE, Kind
from gpucloud.locks import LockBusy, exclusive
from tenants.models import Tenant

log = logging.getLogger(__name__)
FINALIZER = "gpucloud.io/finalizer"
KINDS = (TENANT_RESOURCE, RATE_CARD_RESOURCE)
MERGE = "application/merge-patch+json"
REASONS = {400: "InvalidSpec", 403: "Forbidden", 409: "Conflict", 422: "Refused"}


def actor_of(host_cluster: HostCluster) -> Actor:
    """Who the custom resources of a host cluster write as: trusted like a GitOps source (whoever may
    write those objects in that namespace decides, so its RBAC is the gate; docs/gitops.md)."""
    return Actor(
        user=None,
        label=f"system:kubernetes:{host_cluster.name}/{host_cluster.tenants_namespace}",
        operator=True,
    )


def source_of(host_cluster: HostCluster, kind: Kind, name: str) -> str:
    """The `ManagedObject.source` of one custom resource: what it applied, its deletion prunes."""
    return f"kubernetes:{host_cluster.name}/{host_cluster.tenants_namespace}/{kind.kind}/{name}"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Outcome:
    """What one reconcile of one object found: the conditions to write (type → status, reason, message)."""

    ready: bool
    reason: str
    message: str
    stalled: bool = False
    reconciling: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def status(self, generation: int, previous: dict[str, Any]) -> dict[str, Any]:
        """The object's new status; a condition whose status did not change keeps its transition time."""
        before = {c.get("type"): c for c in previous.get("conditions") or []}
        wanted = [("Ready", self.ready)]
        if self.stalled:
            wanted.append(("Stalled", True))
        if self.reconciling:
            wanted.append(("Reconciling", True))
        conditions = []
        for kind, value in wanted:
            status = "True" if value else "False"
            old = before.get(kind) or {}
            conditions.append(
                {
                    "type": kind,
                    "status": status,
                    "reason": self.reason,
                    "message": self.message,
                    "observedGeneration": generation,
                    "lastTransitionTime": old.get("lastTransitionTime")
                    if old.get("status") == status
                    else _now(),
                }
            )
        return {"observedGeneration": generation, "conditions": conditions, **self.extra}


def _tenant_outcome(name: str) -> Outcome:
    tenant = Tenant.objects.filter(slug=name).first()
    if tenant is None:  # a dry run never reaches here; a tenant always exists after a successful apply
        return Outcome(False, "Missing", f"tenant {name} does not exist")
    extra = {"tenantId": tenant.public_id, "state": tenant.state}
    quotas = tenant.quotas.count()
    if tenant.state == Tenant.State.READY:
        return Outcome(True, "Ready", f"tenant {name} is ready with {quotas} quotas", extra=extra)
    if tenant.state == Tenant.State.FAILED:
        reason = tenant.state_reason or "its cluster could not be provisioned"
        return Outcome(False, "ProvisioningFailed", reason, stalled=True, extra=extra)
    if tenant.state == Tenant.State.SUSPENDED:
        return Outcome(False, "Suspended", f"tenant {name} is suspended", extra=extra)
    if tenant.state in GONE:
        return Outcome(False, "Deleted", f"tenant {name} is {tenant.state}", stalled=True, extra=extra)
    return Outcome(False, "Provisioning", f"tenant {name} is {tenant.state}", reconciling=True, extra=extra)


def _refusal(exc: ManifestInvalid) -> Outcome:
    message = "; ".join(f"{p.field}: {p.reason}" if p.field else p.reason for p in exc.problems)
    return Outcome(False, REASONS.get(exc.status, "Refused"), message, stalled=True)


class Controller:
    """Applies the Tenant and RateCard custom resources of one host cluster's watched namespace."""

    def __init__(
        self,
        host_cluster: HostCluster,
        *,
        api: KubeApi | None = None,
        resync_seconds: float = 60,
        watch_seconds: int = 300,
    ) -> None:
        self.host_cluster = host_cluster
        self.namespace = host_cluster.tenants_namespace
        self.api = api or KubeApi(api_client_of(host_cluster), RetryPolicy(attempts=3))
        self.resync_seconds = resync_seconds
        self.watch_seconds = watch_seconds
        self._written: dict[str, dict[str, Any]] = {}  # uid → the status last written

    # --- one object ----------------------------------------------------------------------------

    def reconcile(self, kind: Kind, obj: dict[str, Any]) -> None:
        """Bring gpucloud in line with one custom resource and write its status. A bad spec is a status,
        never an exception; a failure to reach the cluster is logged and left to the next pass."""
        name = obj["metadata"]["name"]
        try:
            with exclusive(f"tenant-resource:{self.host_cluster.pk}:{kind.kind}:{name}"):
                if obj["metadata"].get("deletionTimestamp"):
                    self._finalize(kind, obj)
                else:
                    self._apply(kind, obj)
        except LockBusy:
            log.info("custom resource busy elsewhere", extra={"kind": kind.kind, "resource": name})
        except DriverError as exc:  # e.g. 409: it changed meanwhile; the watch brings the new version
            log.warning("custom resource %s %s: %s", kind.kind, name, exc)

    def _apply(self, kind: Kind, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        if FINALIZER not in (meta.get("finalizers") or []):
            # Before anything is applied: a deletion can then never skip us.
            obj = self._patch(
                kind, obj, {"metadata": {"finalizers": [*meta.get("finalizers", []), FINALIZER]}}
            )
            meta = obj["metadata"]
        document = {
            "apiVersion": API_VERSION,
            "kind": kind.kind,
            "metadata": {"name": meta["name"]},
            "spec": obj.get("spec") or {},
        }
        generation = int(meta.get("generation") or 1)
        try:
            documents = from_bodies([document], file=f"{self.namespace}/{kind.plural}/{meta['name']}")
            apply(
                documents,
                actor=actor_of(self.host_cluster),
                source=source_of(self.host_cluster, kind, meta["name"]),
                revision=f"generation {generation}",
            )
        except ManifestInvalid as exc:
            outcome = _refusal(exc)
        else:
            if kind is TENANT_RESOURCE:
                outcome = _tenant_outcome(meta["name"])
            else:
                outcome = Outcome(True, "Applied", f"rate card {meta['name']} is applied")
        self._write_status(kind, obj, outcome.status(generation, self._status_of(obj)))

    def _finalize(self, kind: Kind, obj: dict[str, Any]) -> None:
        """The object is being deleted: prune what it applied; drop the finalizer once that is done."""
        meta = obj["metadata"]
        if FINALIZER not in (meta.get("finalizers") or []):
            return
        waiting = self.forget(kind, meta["name"])
        if waiting is not None:
            generation = int(meta.get("generation") or 1)
            self._write_status(kind, obj, waiting.status(generation, self._status_of(obj)))
            return
        finalizers = [f for f in meta["finalizers"] if f != FINALIZER]
        self._patch(kind, obj, {"metadata": {"finalizers": finalizers or None}})
        log.info("custom resource finalized", extra={"kind": kind.kind, "resource": meta["name"]})

    def forget(self, kind: Kind, name: str) -> Outcome | None:
        """Prune what the custom resource `name` applied (the GitOps prune: a tenant is deleted, a rate card
        withdrawn). Returns why the finalizer must stay, or None once gpucloud is done."""
        source = source_of(self.host_cluster, kind, name)
        if ManagedObject.objects.filter(kind=kind.kind, name=name, source=source).exists():
            try:
                apply([], actor=actor_of(self.host_cluster), source=source, prune=True)
            except ManifestInvalid as exc:
                return _refusal(exc)
        if kind is TENANT_RESOURCE:
            tenant = Tenant.objects.filter(slug=name, state=Tenant.State.DELETING).first()
            if tenant is not None:  # its cluster is being torn down: the object stays until it is gone
                return Outcome(False, "Deleting", f"tenant {name} is being deleted", reconciling=True)
        return None

    def _patch(self, kind: Kind, obj: dict[str, Any], patch: dict[str, Any]) -> Any:
        """Change the object's metadata (its finalizers), conditionally: the list is replaced whole, so a
        version changed meanwhile answers 409 and the object is reconciled again from its next event."""
        meta = obj["metadata"]
        body = copy.deepcopy(patch)
        body["metadata"]["resourceVersion"] = meta["resourceVersion"]
        return self.api.request(
            "PATCH", kind.path(self.namespace, meta["name"]), body=body, content_type=MERGE
        )

    def _status_of(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The object's latest status: the one last written here, which the event of an older version of the
        object (arriving after that write) does not carry yet."""
        return self._written.get(obj["metadata"].get("uid", "")) or obj.get("status") or {}

    def _write_status(self, kind: Kind, obj: dict[str, Any], status: dict[str, Any]) -> None:
        """Write the status (only gpucloud writes it, so unconditionally) unless it is already there."""
        uid = obj["metadata"].get("uid", "")
        if status in (obj.get("status"), self._written.get(uid)):
            return
        path = kind.path(self.namespace, obj["metadata"]["name"]) + "/status"
        self.api.request("PATCH", path, body={"status": status}, content_type=MERGE)
        self._written[uid] = status

    # --- lists and watches ---------------------------------------------------------------------

    def sync(self, kind: Kind) -> str:
        """List every object of `kind` and reconcile each (the level-triggered pass). Returns the list's
        resourceVersion, where a watch resumes."""
        listing = self.api.get(kind.path(self.namespace))
        for obj in listing.get("items", []):
            obj.setdefault("apiVersion", API_VERSION)
            self.reconcile(kind, obj)
        return str(listing["metadata"]["resourceVersion"])

    def follow(self, kind: Kind, resource_version: str, timeout_seconds: int) -> str:
        """One watch from `resource_version` until the server ends it; reconciles every change. Returns
        the last resourceVersion seen (where the next watch resumes). Raises `Gone`: list again."""
        for event in self.api.watch(
            kind.path(self.namespace), resource_version=resource_version, timeout_seconds=timeout_seconds
        ):
            obj = event["object"]
            resource_version = str(obj["metadata"]["resourceVersion"])
            if event["type"] == "BOOKMARK":
                continue
            if event["type"] == "DELETED":
                # Gone without our finalizer having run (removed by hand, or never added): prune anyway.
                self._written.pop(obj["metadata"].get("uid", ""), None)
                self.forget(kind, obj["metadata"]["name"])
                continue
            self.reconcile(kind, obj)
        return resource_version

    def run(self, kind: Kind, stop: threading.Event) -> None:
        """List, then watch and resume, listing again every `resync_seconds` and after a 410 Gone, until
        `stop` is set. Temporary failures back off (up to 30 s); nothing here ends the loop."""
        version: str | None = None
        next_list = 0.0
        failures = 0
        while not stop.is_set():
            try:
                if version is None or time.monotonic() >= next_list:
                    version = self.sync(kind)
                    next_list = time.monotonic() + self.resync_seconds
                left = max(1, int(min(self.watch_seconds, next_list - time.monotonic())))
                version = self.follow(kind, version, left)
                failures = 0
            except Gone:
                log.info("watch expired; listing again", extra={"kind": kind.kind})
                version = None
            except Exception as exc:  # the cluster or the database: back off and carry on
                failures += 1
                log.warning(
                    "custom resources: %s: %s",
                    type(exc).__name__,
                    exc,
                    extra={"host_cluster": self.host_cluster.name, "kind": kind.kind},
                )
                if not isinstance(exc, TemporaryDriverError):
                    version = None  # a missing CRD, a refused token, the database: list again after
                stop.wait(min(30.0, 0.5 * 2**failures))
            finally:
                close_old_connections()
