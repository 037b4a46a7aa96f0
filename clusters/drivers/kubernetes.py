"""The `kubernetes` driver: makes a real host cluster match the desired state of its tenants.

One pass (`KubernetesDriver.reconcile`) is level-triggered:

1. render every desired object (pure functions in `clusters.render`);
2. list each managed kind once, by the label `app.kubernetes.io/managed-by=gpucloud`;
3. server-side apply (field manager `gpucloud`, forced) only the objects that are missing, whose
   `gpucloud.io/spec-hash` annotation differs from the desired one, or whose live content no longer
   contains what gpucloud set (`clusters.drivers.in_sync`: an edit by hand, restored and counted as drift);
4. delete objects that carry both ownership labels and are no longer desired (only among the named
   tenants unless the pass is complete; shared objects only on a complete pass);
5. observe each tenant's phase from what it saw, and its scheduler's workloads: on Kueue the `Workload`
   objects in its namespace, listed once per pass across all namespaces (they are Kueue's, not gpucloud's,
   so no label selects them; read by `clusters.drivers.kueue_workloads`), with the pending ones' places
   from Kueue's visibility API; on KAI the `PodGroup` objects not scheduled yet
   (`clusters.drivers.kai_pod_groups`).

An unchanged cluster therefore costs one list per kind and no writes; the visibility API, pods and
PriorityClasses are read only in passes where something waits.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from kubernetes import client

from clusters.drivers import kai_pod_groups
from clusters.drivers.in_sync import in_sync
from clusters.drivers.inference_status import observe_endpoint
from clusters.drivers.kueue_workloads import positions, workload_of
from clusters.render import (
    MANAGED_BY,
    MANAGER,
    SHARED,
    SPEC_HASH,
    TENANT,
    ClusterProfile,
    Manifest,
    render_shared,
    render_tenant,
)
from clusters.render.inference import object_name
from clusters.render.kinds import kinds_for
from clusters.render.vcluster import vcluster_name
from clusters.spec import ReconcileResult, TenantObservation, TenantSpec, WorkloadObservation
from gpucloud.kube import kinds as k
from gpucloud.kube.api import ApiStatusError, KubeApi, NotFound, RetryPolicy, api_client_from_kubeconfig
from gpucloud.kube.errors import DriverError, PermanentDriverError, TemporaryDriverError

__all__ = ["ForeignObject", "KubernetesDriver", "PartialReconcile", "api_client_from_kubeconfig"]

log = logging.getLogger(__name__)
ObjKey = tuple[tuple[str, str], str | None, str]  # (apiVersion, kind), namespace, name
# Tenant lists longer than this are not spelled out in a label selector (URL length); all are listed.
SELECTOR_TENANT_LIMIT = 50


def _key(kind: k.Kind, manifest: Manifest) -> ObjKey:
    meta = manifest["metadata"]
    return (kind.key, meta.get("namespace") if kind.namespaced else None, meta["name"])


def _labels(obj: Manifest) -> dict[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


@dataclass
class _Pass:
    """The state of one reconcile pass."""

    tenants: Sequence[TenantSpec]
    complete: bool
    result: ReconcileResult = field(default_factory=ReconcileResult)
    live: dict[ObjKey, Manifest] = field(default_factory=dict)
    applied: dict[ObjKey, Manifest] = field(default_factory=dict)
    unlisted: dict[str, str] = field(default_factory=dict)  # kind -> why it could not be listed
    deleted_namespaces: set[str] = field(default_factory=set)
    new_namespaces: set[str] = field(default_factory=set)  # read as absent in this pass
    temporary: list[str] = field(default_factory=list)

    @cached_property
    def slugs(self) -> set[str]:
        return {tenant.slug for tenant in self.tenants}

    def fail(self, slug: str, message: str) -> None:
        self.result.errors.setdefault(slug, message)


class ForeignObject(PermanentDriverError):
    """An object gpucloud would create exists without gpucloud's ownership labels."""


class PartialReconcile(TemporaryDriverError):
    """Some requests kept failing temporarily; the pass did the rest, and `result` says what it saw.

    Everything a pass does is idempotent, so retrying the whole pass later finishes the job.
    """

    def __init__(self, result: ReconcileResult, failures: list[str]) -> None:
        super().__init__(f"{len(failures)} requests kept failing, e.g. {failures[0]}")
        self.result = result
        self.failures = failures


class KubernetesDriver:
    """Drives the tenants of one host cluster through the official Kubernetes client.

    Build the client with `api_client_from_kubeconfig(text)`; `profile` says which scheduler, vCluster
    mode and add-ons the cluster has (see `clusters.drivers.discovery`).
    """

    def __init__(
        self, api_client: client.ApiClient, profile: ClusterProfile, *, retry: RetryPolicy | None = None
    ) -> None:
        self.api = KubeApi(api_client, retry)
        self.profile = profile
        self.kinds = kinds_for(profile)
        self._by_key = {kind.key: kind for kind in self.kinds}

    def close(self) -> None:
        """Release the client's connection pool."""
        self.api.api_client.close()

    def reconcile(self, tenants: Sequence[TenantSpec], *, complete: bool) -> ReconcileResult:
        """One level-triggered pass.

        Raises TemporaryDriverError when a retry later should finish it (`PartialReconcile` carries what the
        pass saw), and PermanentDriverError when the cluster refuses gpucloud's credentials (401).
        """
        calls, writes = self.api.calls, self.api.writes
        run = _Pass(tenants, complete)
        self._list(run)
        desired = self._desired(run)
        self._apply(run, desired)
        self._prune(run, desired)
        for tenant in tenants:
            run.result.observations[tenant.slug] = self._observe(run, tenant)
        self._observe_workloads(run)
        self._observe_endpoints(run)
        run.result.api_calls = self.api.calls - calls
        run.result.writes = self.api.writes - writes
        if run.temporary:
            raise PartialReconcile(run.result, run.temporary)
        return run.result

    # --- 1. what the cluster has ----------------------------------------------------------------

    def _selector(self, run: _Pass) -> str:
        selector = f"{MANAGED_BY}={MANAGER}"
        if not run.complete and len(run.tenants) <= SELECTOR_TENANT_LIMIT:
            selector += f",{TENANT} in ({','.join(sorted(run.slugs | {SHARED}))})"
        return selector

    def _list(self, run: _Pass) -> None:
        selector = self._selector(run)
        for kind in self.kinds:
            try:
                kind_selector = f"{selector},{kind.selector}" if kind.selector else selector
                listed = self.api.get(kind.path(), {"labelSelector": kind_selector})
            except NotFound:
                run.unlisted[kind.kind] = (
                    f"the cluster does not serve {kind.kind} ({kind.api_version}): is its CRD installed?"
                )
                continue
            except ApiStatusError as exc:
                if exc.status == 401:
                    raise  # the credentials, not any tenant: a host-cluster error
                run.unlisted[kind.kind] = f"cannot list {kind.kind}: {exc}"
                continue
            for item in listed.get("items") or []:
                run.live[_key(kind, item)] = item
        if run.unlisted:
            message = "; ".join(run.unlisted.values())
            for tenant in run.tenants:
                run.fail(tenant.slug, message)

    # --- 2. what it should have -----------------------------------------------------------------

    def _desired(self, run: _Pass) -> dict[ObjKey, tuple[str, Manifest]]:
        """Desired objects by key, with the slug whose failure they would be reported on."""
        desired: dict[ObjKey, tuple[str, Manifest]] = {}
        for manifest in render_shared(run.tenants, self.profile):
            desired[self._key(manifest)] = (SHARED, manifest)
        for tenant in run.tenants:
            for manifest in render_tenant(tenant, self.profile):
                desired[self._key(manifest)] = (tenant.slug, manifest)
        return desired

    def _key(self, manifest: Manifest) -> ObjKey:
        return _key(self._by_key[(manifest["apiVersion"], manifest["kind"])], manifest)

    # --- 3. apply the difference ----------------------------------------------------------------

    def _apply(self, run: _Pass, desired: dict[ObjKey, tuple[str, Manifest]]) -> None:
        if run.unlisted:
            return  # without a full picture of the cluster, acting could only make a partial state
        namespaces = {t.slug: t.namespace for t in run.tenants}
        set_up = {
            key[2]
            for key, obj in run.live.items()
            if key[0] == k.NAMESPACE.key and not obj["metadata"].get("deletionTimestamp")
        }
        blocked = {
            slug
            for slug, ns in namespaces.items()
            if (k.NAMESPACE.key, None, ns) in run.live and ns not in set_up
        }  # terminating
        for key, (slug, manifest) in desired.items():
            if slug in run.result.errors or slug in blocked:
                continue  # no partial progress on top of a failure or into a terminating namespace
            live = run.live.get(key)
            if live is not None and in_sync(manifest, live):
                continue
            if self._is_drift(manifest, live, slug, namespaces.get(slug), set_up):
                run.result.drift_repaired += 1
            kind = self._by_key[key[0]]
            try:
                run.applied[key] = self._write(run, kind, manifest, slug, exists=live is not None)
            except (TemporaryDriverError, NotFound) as exc:
                # NotFound on apply: the namespace is not there (yet), e.g. its own apply just failed.
                run.temporary.append(str(exc))
                blocked.add(slug)
            except PermanentDriverError as exc:
                self._fail_object(run, slug, kind, manifest, exc)

    def _write(self, run: _Pass, kind: k.Kind, manifest: Manifest, slug: str, *, exists: bool) -> Manifest:
        """Server-side apply; an object the lists did not show is read first, never to take over a stranger's.

        (A forced apply would silently adopt an object someone else made with the same name. Creating with
        POST instead would record gpucloud as an Update manager, whose fields a later apply cannot remove.)
        Nothing can be in a namespace this pass found absent, so its content is not read.
        """
        path = kind.object_path(manifest)
        namespace = manifest["metadata"].get("namespace")
        if not exists and not (kind.namespaced and namespace in run.new_namespaces):
            try:
                labels = _labels(self.api.get(path))
            except NotFound:
                labels = None
                if kind is k.NAMESPACE:
                    run.new_namespaces.add(manifest["metadata"]["name"])
            if labels is not None and (labels.get(MANAGED_BY) != MANAGER or labels.get(TENANT) != slug):
                raise ForeignObject(
                    f"already exists and is not managed by gpucloud for {slug}: delete it, or label it "
                    f"{MANAGED_BY}={MANAGER} and {TENANT}={slug} to hand it over"
                )
        return self.api.apply(path, manifest)

    @staticmethod
    def _is_drift(
        manifest: Manifest, live: Manifest | None, slug: str, namespace: str | None, set_up: set[str]
    ) -> bool:
        """An edit by hand: same spec-hash but changed content, or gone from a tenant that is set up.

        A missing object counts when its tenant's namespace already existed before this pass; this
        over-counts only when the cluster profile gains a kind (e.g. Cilium is switched on).
        """
        if live is not None:
            annotations = live["metadata"].get("annotations") or {}
            return bool(annotations.get(SPEC_HASH) == manifest["metadata"]["annotations"][SPEC_HASH])
        if slug == SHARED or manifest["kind"] == "Namespace":
            return False
        return namespace in set_up

    def _fail_object(self, run: _Pass, slug: str, kind: k.Kind, manifest: Manifest, exc: DriverError) -> None:
        name = manifest["metadata"]["name"]
        message = f"{kind.kind} {name}: {exc}"
        if slug == SHARED:  # every tenant that needs it is blocked
            for tenant in run.tenants:
                if tenant.desired != "absent":
                    run.fail(tenant.slug, message)
        else:
            run.fail(slug, message)

    # --- 4. prune what is no longer desired -----------------------------------------------------

    def _prunable(self, run: _Pass, key: ObjKey, obj: Manifest, desired: dict[ObjKey, Any]) -> bool:
        labels = _labels(obj)
        if key in desired or labels.get(MANAGED_BY) != MANAGER or TENANT not in labels:
            return False
        if obj["metadata"].get("deletionTimestamp"):
            return False
        owner = labels[TENANT]
        if owner == SHARED:
            return run.complete
        return run.complete or owner in run.slugs

    def _prune(self, run: _Pass, desired: dict[ObjKey, tuple[str, Manifest]]) -> None:
        if run.unlisted:
            return  # an object missing from a failed list could be one we would wrongly keep or delete
        doomed = [(key, obj) for key, obj in run.live.items() if self._prunable(run, key, obj, desired)]
        # Content of a namespace that is being deleted (now, or already terminating) goes with it.
        doomed_namespaces = {key[2] for key, _ in doomed if key[0] == k.NAMESPACE.key} | {
            key[2]
            for key, obj in run.live.items()
            if key[0] == k.NAMESPACE.key and obj["metadata"].get("deletionTimestamp")
        }
        order = {kind.key: index for index, kind in enumerate(self.kinds)}
        # Reverse apply order: queues and the vCluster before the namespace that holds them.
        for key, obj in sorted(doomed, key=lambda item: -order[item[0][0]]):
            kind = self._by_key[key[0]]
            # The vCluster is deleted explicitly, before its namespace, so that Flux uninstalls it.
            if key[1] in doomed_namespaces and kind not in k.VCLUSTER_KINDS:
                continue
            slug = _labels(obj)[TENANT]
            try:
                self.api.delete(kind.object_path(obj))
            except TemporaryDriverError as exc:
                run.temporary.append(str(exc))
                continue
            except PermanentDriverError as exc:
                self._fail_object(run, slug, kind, obj, exc)
                continue
            if kind is k.NAMESPACE:
                run.deleted_namespaces.add(key[2])

    # --- 5. observe -----------------------------------------------------------------------------

    def _observe(self, run: _Pass, tenant: TenantSpec) -> TenantObservation:
        slug = tenant.slug
        if slug in run.result.errors:
            return TenantObservation(slug, "failed", message=run.result.errors[slug])
        ns_key: ObjKey = (k.NAMESPACE.key, None, tenant.namespace)
        if tenant.desired == "absent":
            if ns_key in run.live or tenant.namespace in run.deleted_namespaces:
                return TenantObservation(slug, "deleting", message="waiting for the namespace to be deleted")
            return TenantObservation(slug, "absent")
        endpoint = self.profile.endpoint(slug)
        if run.live.get(ns_key, {}).get("metadata", {}).get("deletionTimestamp"):
            return TenantObservation(
                slug, "provisioning", endpoint, "waiting for the previous namespace to finish terminating"
            )
        if tenant.desired == "suspended":
            return TenantObservation(slug, "suspended", endpoint)
        ready, message = self._vcluster_ready(run, tenant)
        if ready:
            return TenantObservation(slug, "ready", endpoint)
        return TenantObservation(slug, "provisioning", endpoint, message)

    def _observe_workloads(self, run: _Pass) -> None:
        """Kueue's `Workload` objects in the pass's tenants' namespaces: one list, however many tenants; on
        KAI its waiting `PodGroup`s instead (`_observe_pod_groups`).

        When the list fails the tenants' workloads are left unobserved (kept as stored): a workload view
        must not fail a tenant's reconcile.
        """
        if self.profile.scheduler == "kai":
            self._observe_pod_groups(run)
            return
        tenants = self._observed_tenants(run, run.result.workloads)
        listed = self._read(k.WORKLOAD.path(), "Kueue workloads") if tenants else None
        if listed is None:
            return
        observed: dict[str, list[WorkloadObservation]] = {t.slug: [] for t in tenants.values()}
        for item in listed.get("items") or []:
            owner = tenants.get(item.get("metadata", {}).get("namespace", ""))
            if owner is not None:
                observed[owner.slug].append(workload_of(item, owner))
        self._place(tenants, observed)
        for slug, workloads in observed.items():
            run.result.workloads[slug] = tuple(sorted(workloads, key=lambda w: w.name))

    @staticmethod
    def _observed_tenants(
        run: _Pass, into: dict[str, tuple[WorkloadObservation, ...]]
    ) -> dict[str, TenantSpec]:
        """The tenants whose workloads a pass reads, by namespace; one going away has none (whatever it
        ran goes with its namespace)."""
        for tenant in run.tenants:
            if tenant.desired == "absent":
                into[tenant.slug] = ()
        return {t.namespace: t for t in run.tenants if t.desired != "absent"}

    def _read(self, path: str, what: str, query: dict[str, str] | None = None) -> Manifest | None:
        """A read for a workload view: None when it fails (401 excepted: the credentials are the cluster's
        problem), logged with `what`."""
        try:
            answer: Manifest = self.api.get(path, query)
        except (NotFound, ApiStatusError, TemporaryDriverError) as exc:
            if isinstance(exc, ApiStatusError) and exc.status == 401:
                raise
            log.warning("cannot read %s", what, extra={"error": str(exc), "path": path})
            return None
        return answer

    def _place(self, tenants: dict[str, TenantSpec], observed: dict[str, list[WorkloadObservation]]) -> None:
        """Each pending workload's place in its LocalQueue by Kueue's visibility API, asked only for the
        queues where something waits, in the version the server serves (v1beta2, else v1beta1). Where it
        serves none or refuses, positions stay unknown and the queue keeps gpucloud's own order (the
        conformance report's `kueue_visibility` says how to enable it)."""
        namespaces = {t.slug: ns for ns, t in tenants.items()}
        queues = sorted(
            {
                (namespaces[slug], w.queue)
                for slug, ws in observed.items()
                for w in ws
                if w.state == "pending" and w.queue  # a Workload naming no queue is in none
            }
        )
        version = self._visibility_version() if queues else None
        if version is None:
            return
        places: dict[tuple[str, str], dict[str, int]] = {}
        for namespace, queue in queues:
            path = (
                f"/apis/{k.KUEUE_VISIBILITY}/{version}/namespaces/{namespace}/localqueues/{queue}"
                "/pendingworkloads"
            )
            summary = self._read(path, "Kueue's pending workloads")
            if summary is not None:
                places[(namespace, queue)] = positions(summary)
        for slug, workloads in observed.items():
            where = namespaces[slug]
            observed[slug] = [
                replace(w, position=places.get((where, w.queue), {}).get(w.name))
                if w.state == "pending"
                else w
                for w in workloads
            ]

    def _visibility_version(self) -> str | None:
        """The version of Kueue's visibility API the server serves (discovery), or None."""
        group = self._read(f"/apis/{k.KUEUE_VISIBILITY}", "Kueue's visibility API")
        served = {v.get("version") for v in (group or {}).get("versions") or []}
        return next((v for v in ("v1beta2", "v1beta1") if v in served), None)

    def _observe_pod_groups(self, run: _Pass) -> None:
        """KAI's `PodGroup`s not scheduled yet in the tenants' namespaces (`clusters.drivers.kai_pod_groups`):
        one list of PodGroups per pass; the pods of namespaces holding a group with nothing allocated and
        the PriorityClasses only when there is such a group."""
        tenants = self._observed_tenants(run, run.result.pod_groups)
        listed = self._read(k.POD_GROUP.path(), "KAI pod groups") if tenants else None
        if listed is None:
            return
        candidates: dict[str, list[Manifest]] = {}
        for item in listed.get("items") or []:
            namespace = item.get("metadata", {}).get("namespace", "")
            if namespace in tenants and kai_pod_groups.unallocated(item):
                candidates.setdefault(namespace, []).append(item)
        waiting: dict[str, list[WorkloadObservation]] = {t.slug: [] for t in tenants.values()}
        if candidates:
            classes = self._read(k.PRIORITY_CLASS.path(), "PriorityClasses")
            priority_of = kai_pod_groups.priorities((classes or {}).get("items") or [])
        for namespace, groups in candidates.items():
            tenant = tenants[namespace]
            pods = self._read(k.POD.path(namespace), f"the pods of {namespace}")
            if pods is None:
                del waiting[tenant.slug]  # not looked at: keep what is stored
                continue
            members: dict[str, list[Manifest]] = {}
            for pod in pods.get("items") or []:
                group = (pod["metadata"].get("annotations") or {}).get(kai_pod_groups.POD_GROUP_ANNOTATION)
                if group:
                    members.setdefault(group, []).append(pod)
            for group in groups:
                name = group["metadata"]["name"]
                seen = kai_pod_groups.pod_group_of(group, members.get(name, []), tenant, priority_of)
                if seen is not None:
                    waiting[tenant.slug].append(seen)
        for slug, groups_seen in waiting.items():
            run.result.pod_groups[slug] = tuple(sorted(groups_seen, key=lambda w: w.name))

    def _observe_endpoints(self, run: _Pass) -> None:
        """Each running tenant's inference endpoints, from their model servers as this pass saw them (no
        request of its own: the servers were listed or applied)."""
        kind = k.LLM_INFERENCE_SERVICE if self.profile.kserve else k.DEPLOYMENT
        for tenant in run.tenants:
            if tenant.desired != "running" or tenant.slug in run.result.errors:
                continue
            seen = []
            for endpoint in tenant.endpoints:
                key: ObjKey = (kind.key, tenant.namespace, object_name(endpoint))
                seen.append(
                    observe_endpoint(endpoint, run.applied.get(key) or run.live.get(key), self.profile)
                )
            run.result.endpoints[tenant.slug] = tuple(seen)

    def _vcluster_ready(self, run: _Pass, tenant: TenantSpec) -> tuple[bool, str]:
        if self.profile.vcluster_mode == "platform":
            kind, namespace = k.VIRTUAL_CLUSTER_INSTANCE, self.profile.platform_project_namespace
        else:
            kind, namespace = k.HELM_RELEASE, tenant.namespace
        key: ObjKey = (kind.key, namespace, vcluster_name(tenant))
        obj = run.applied.get(key) or run.live.get(key)
        status = (obj or {}).get("status") or {}
        if kind is k.VIRTUAL_CLUSTER_INSTANCE:
            return status.get("phase") == "Ready", f"vCluster phase: {status.get('phase') or 'pending'}"
        for condition in status.get("conditions") or []:
            if condition.get("type") == "Ready":
                message = condition.get("message") or condition.get("reason") or ""
                return condition.get("status") == "True", f"vCluster not ready: {message}"
        return False, "waiting for the vCluster to be installed"
