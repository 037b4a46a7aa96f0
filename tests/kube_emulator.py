"""A stand-in for the Kubernetes API server, for tests and benchmarks that cannot run a real one.

`KubeEmulator` subclasses kmock's `KubernetesEmulator`. It keeps kmock's handler lifecycle and resource
registry (`emulator.resources`, filled by `register_crds`), and replaces its request parsing and object
store: kmock 0.8's path parser is what breaks core namespaces, and its store scans every object on every
request, too slow for the 8,000 objects of the benchmark. What it fixes for the official client (see
shared/reference/test-infrastructure.md):

- `/api/v1/namespaces[/name]` is parsed correctly (kmock answers 500);
- create answers 201, PUT replaces, server-side apply of an absent object creates it;
- `labelSelector` is honoured (`=`, `==`, `!=`, `in`, `notin`, exists, `!key`);
- `/version/`, `/api/`, `/apis/` (with the client's trailing slash) and group discovery are served
  from the registry, and an unregistered resource answers 404 like a missing CRD;
- objects get `uid`, `resourceVersion`, `generation` and `creationTimestamp`;
- objects are indexed per resource, so a request costs O(1) (a list costs O(objects of that kind)).

Deliberate simplifications: server-side apply by the single manager gpucloud replaces the object's
top-level fields (other than metadata and status) with the applied ones and keeps no managedFields;
there is no admission or schema validation; deleting a namespace deletes its objects at once and
leaves the namespace `Terminating` until the harness calls `finish_namespace_deletions()` (it plays
the namespace controller). Watches (`?watch=true&resourceVersion=N`, JSON lines of `{type, object}`) are
served for any resource, replaying the events after N that it still remembers (the last 10,000) and ending
after `timeoutSeconds` (default 60) like the API server; label selectors are not applied to them. It also
injects faults (`Faults`) and counts calls and writes.

`start_emulator()` runs it on 127.0.0.1 in a thread with its own event loop, for sync tests.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import copy
import datetime
import json
import random
import re
import threading
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp.web
import kmock
import yaml
from aiohttp.test_utils import RawTestServer

T = TypeVar("T")
Obj = dict[str, Any]
ResKey = tuple[str, str, str]  # group ("" for core), version, plural
ObjKey = tuple[str | None, str]  # namespace (None for cluster-scoped), name

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class Resource:
    """A resource type the emulated server serves."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def key(self) -> ResKey:
        return (self.group, self.version, self.plural)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def _r(api_version: str, plural: str, kind: str, namespaced: bool) -> Resource:
    group, _, version = api_version.rpartition("/")
    return Resource(group, version, plural, kind, namespaced)


BUILTIN = (
    _r("v1", "namespaces", "Namespace", False),
    _r("v1", "nodes", "Node", False),
    _r("v1", "secrets", "Secret", True),
    _r("v1", "configmaps", "ConfigMap", True),
    _r("v1", "resourcequotas", "ResourceQuota", True),
    _r("v1", "limitranges", "LimitRange", True),
    _r("v1", "pods", "Pod", True),
    _r("v1", "services", "Service", True),
    _r("networking.k8s.io/v1", "networkpolicies", "NetworkPolicy", True),
    _r("apiextensions.k8s.io/v1", "customresourcedefinitions", "CustomResourceDefinition", False),
)

# The CRDs of the add-ons a GPU host cluster may run, by the name tests register them with.
CRDS: dict[str, tuple[Resource, ...]] = {
    "kueue": tuple(
        _r("kueue.x-k8s.io/v1beta2", plural, kind, namespaced)
        for plural, kind, namespaced in (
            ("resourceflavors", "ResourceFlavor", False),
            ("clusterqueues", "ClusterQueue", False),
            ("cohorts", "Cohort", False),
            ("localqueues", "LocalQueue", True),
            ("workloadpriorityclasses", "WorkloadPriorityClass", False),
            ("topologies", "Topology", False),
            ("workloads", "Workload", True),
        )
    ),
    "kai": (
        _r("scheduling.run.ai/v2", "queues", "Queue", False),
        _r("scheduling.run.ai/v2alpha2", "podgroups", "PodGroup", True),
        _r("kai.scheduler/v1alpha1", "topologies", "Topology", False),
    ),
    "flux": (
        _r("helm.toolkit.fluxcd.io/v2", "helmreleases", "HelmRelease", True),
        _r("source.toolkit.fluxcd.io/v1", "helmrepositories", "HelmRepository", True),
    ),
    "vcluster-platform": (
        _r("management.loft.sh/v1", "virtualclusterinstances", "VirtualClusterInstance", True),
    ),
    "cilium": (_r("cilium.io/v2", "ciliumnetworkpolicies", "CiliumNetworkPolicy", True),),
    "gpu-operator": (_r("nvidia.com/v1", "clusterpolicies", "ClusterPolicy", False),),
}


class ApiError(Exception):
    """An answer other than success, rendered as a Kubernetes Status."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: dicts merge, `None` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


_TERM = re.compile(r"^\s*(!?)([\w./-]+)\s*(?:(==|=|!=)\s*([\w.-]*)|\s+(in|notin)\s*\(([^)]*)\))?\s*$")
Requirement = tuple[str, str, frozenset[str]]  # operator, key, values


def parse_selector(text: str) -> list[Requirement]:
    """A label selector as requirements that must all hold (operators `=`, `!=`, in, notin, exists, !)."""
    terms = [t for t in re.split(r",(?![^(]*\))", text) if t.strip()]
    requirements: list[Requirement] = []
    for term in terms:
        match = _TERM.match(term)
        if not match:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {term!r}")
        negated, key, op, value, set_op, values = match.groups()
        if op:
            requirements.append(("!=" if op == "!=" else "=", key, frozenset([value])))
        elif set_op:
            requirements.append((set_op, key, frozenset(v.strip() for v in values.split(",") if v.strip())))
        else:
            requirements.append(("!" if negated else "exists", key, frozenset()))
    return requirements


def selects(requirements: list[Requirement], labels: dict[str, str]) -> bool:
    for op, key, values in requirements:
        value = labels.get(key)
        ok = {
            "=": value in values,
            "in": value in values,
            "!=": value not in values,
            "notin": value not in values,
            "exists": key in labels,
            "!": key not in labels,
        }[op]
        if not ok:
            return False
    return True


@dataclass
class Faults:
    """Which requests fail, and how. Decisions are drawn from a seeded generator, in request order.

    `share` of the requests (all methods) answer one of `kinds`: an HTTP status (409, 429, 500…) without
    touching the store, or "timeout": the request is served, then the answer is held for `hang_seconds`
    (longer than the client's timeout), so the client sees a timeout for a request that took effect.
    `forbidden` path prefixes answer 403 to every request; `invalid` ones answer 422 to writes, as
    admission or schema validation would.
    """

    share: float = 0.0
    kinds: tuple[int | str, ...] = (409, 429, 500)
    seed: int = 0
    hang_seconds: float = 2.0
    forbidden: set[str] = field(default_factory=set)
    invalid: set[str] = field(default_factory=set)
    methods: frozenset[str] | None = None  # only these methods draw faults (None: all)
    limit: int | None = None  # at most this many faults in all (None: no limit)
    _random: random.Random = field(init=False, repr=False)
    _drawn: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    def draw(self, method: str = "GET") -> int | str | None:
        if self.methods is not None and method not in self.methods:
            return None
        if self.limit is not None and self._drawn >= self.limit:
            return None
        if self.share <= 0 or self._random.random() >= self.share:
            return None
        self._drawn += 1
        return self._random.choice(self.kinds)


@dataclass(frozen=True)
class Path:
    """A Kubernetes resource path, parsed."""

    group: str
    version: str
    plural: str
    namespace: str | None
    name: str | None
    subresource: str | None


def parse_path(path: str) -> Path | None:
    """`/api/v1/namespaces/ns/pods/p`, `/apis/g/v/plural`, `/api/v1/namespaces/ns`… or None."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    # `namespaces/<ns>/<plural>…` is a namespaced path; `namespaces[/<name>]` is the Namespace resource.
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else None
    subresource = "/".join(rest[2:]) or None
    return Path(group, version, plural, namespace, name, subresource)


class KubeEmulator(kmock.KubernetesEmulator):
    """kmock's emulator, made to behave like a real API server for the official client."""

    def __init__(self, *, server_version: tuple[int, int] = (1, 33), faults: Faults | None = None) -> None:
        super().__init__()
        self.server_version = server_version
        self.faults = faults or Faults()
        self.store: dict[ResKey, dict[ObjKey, Obj]] = {}
        self.served: dict[ResKey, Resource] = {}
        self.calls = 0
        self.writes = 0
        self.by_method: Counter[str] = Counter()
        self.injected: Counter[int | str] = Counter()  # faults served, by status or "timeout"
        self.log: list[tuple[str, str, int]] = []  # (method, path, status)
        self._rv = 0
        # Watch events: (resourceVersion, resource, type, object), and the queues of open watches.
        self.events: deque[tuple[int, ResKey, str, Obj]] = deque(maxlen=10_000)
        self.watchers: dict[ResKey, list[asyncio.Queue[tuple[int, str, Obj]]]] = {}
        self.register_resources(BUILTIN)

    # --- registry -------------------------------------------------------------------------------

    def register_resources(self, resources: Iterable[Resource]) -> None:
        for res in resources:
            self.served[res.key] = res
            self.store.setdefault(res.key, {})
            self.resources[kmock.resource(res.group, res.version, res.plural)] = kmock.ResourceInfo(
                kind=res.kind,
                namespaced=res.namespaced,
                verbs={"get", "list", "create", "update", "patch", "delete", "watch"},
            )

    def register_crds(self, *names: str) -> None:
        """Serve the CRDs of the named add-ons (see `CRDS`), as installing them would."""
        for name in names:
            self.register_resources(CRDS[name])
            for res in CRDS[name]:
                crd_name = f"{res.plural}.{res.group}"
                crd = {
                    "apiVersion": "apiextensions.k8s.io/v1",
                    "kind": "CustomResourceDefinition",
                    "metadata": {"name": crd_name},
                    "spec": {
                        "group": res.group,
                        "names": {"plural": res.plural, "kind": res.kind},
                        "scope": "Namespaced" if res.namespaced else "Cluster",
                        "versions": [{"name": res.version, "served": True, "storage": True}],
                    },
                }
                key = ("apiextensions.k8s.io", "v1", "customresourcedefinitions")
                if (None, crd_name) not in self.store[key]:
                    self._create(self.served[key], None, crd)

    def served_resource(self, api_version: str, kind: str) -> Resource:
        for res in self.served.values():
            if res.api_version == api_version and res.kind == kind:
                return res
        raise KeyError(f"{kind} in {api_version} is not served")

    # --- HTTP entry point -------------------------------------------------------------------------

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        body = await raw_request.read()
        method, path = raw_request.method, raw_request.path
        if method == "GET" and raw_request.query.get("watch") in ("1", "true"):
            return await self._watch(raw_request)
        self.calls += 1
        self.by_method[method] += 1
        hang = False
        try:
            fault = self._fault(method, path)
            if fault is not None:
                self.injected[fault] += 1
            if fault == "timeout":
                hang = True
            elif fault is not None:
                assert isinstance(fault, int)
                raise ApiError(fault, _REASONS.get(fault, "InternalError"), f"injected fault {fault}")
            status, payload = self._serve(method, path, dict(raw_request.query), raw_request.headers, body)
        except ApiError as exc:
            status, payload = exc.code, _status(exc)
        if method in WRITE_METHODS and status < 300:
            self.writes += 1
        self.log.append((method, path, status))
        if hang:
            await asyncio.sleep(self.faults.hang_seconds)
        headers = {"Retry-After": "0"} if status == 429 else None
        return aiohttp.web.json_response(payload, status=status, headers=headers)

    def _fault(self, method: str, path: str) -> int | str | None:
        if any(path.startswith(prefix) for prefix in self.faults.forbidden):
            raise ApiError(
                403, "Forbidden", f'{path} is forbidden: User "gpucloud" cannot access this resource'
            )
        if method in WRITE_METHODS and any(path.startswith(prefix) for prefix in self.faults.invalid):
            raise ApiError(422, "Invalid", f"{path} is invalid: spec: Invalid value: rejected by admission")
        return self.faults.draw(method)

    def _serve(
        self, method: str, path: str, query: dict[str, str], headers: Any, body: bytes
    ) -> tuple[int, Any]:
        parsed = parse_path(path)
        if parsed is None:
            if method != "GET":
                raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed on {path}")
            return 200, self._discovery(path.rstrip("/") or "/")
        res = self.served.get((parsed.group, parsed.version, parsed.plural))
        if res is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        namespace = parsed.namespace if res.namespaced else None
        if parsed.name is None:
            if method == "GET":
                return 200, self._list(res, parsed.namespace, query.get("labelSelector", ""))
            if method == "POST":
                return 201, self._create(res, namespace, self._decode(body))
            raise ApiError(405, "MethodNotAllowed", f"{method} on a collection")
        key = (namespace, parsed.name)
        if parsed.subresource not in (None, "status"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if method == "GET":
            return 200, self._get(res, key)
        if method == "PUT":
            return 200, self._replace(res, key, self._decode(body), parsed.subresource)
        if method == "PATCH":
            return self._patch(
                res, key, headers.get("Content-Type", ""), self._decode(body), parsed.subresource
            )
        if method == "DELETE":
            return 200, self._delete(res, key)
        raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed")

    @staticmethod
    def _decode(body: bytes) -> Any:
        try:
            return json.loads(body)
        except ValueError:
            return yaml.safe_load(body)

    # --- discovery --------------------------------------------------------------------------------

    def _discovery(self, path: str) -> Any:
        if path == "/version":
            major, minor = self.server_version
            return {
                "major": str(major),
                "minor": str(minor),
                "gitVersion": f"v{major}.{minor}.0",
                "gitCommit": "0" * 40,
                "gitTreeState": "clean",
                "buildDate": "2026-01-01T00:00:00Z",
                "goVersion": "go1.24",
                "compiler": "gc",
                "platform": "linux/amd64",
            }
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if path == "/apis":
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [self._group(g) for g in self._groups()],
            }
        parts = path.strip("/").split("/")
        if parts[0] == "apis" and len(parts) == 2 and parts[1] in self._groups():
            return {"kind": "APIGroup", "apiVersion": "v1", **self._group(parts[1])}
        if path == "/api/v1" or (parts[0] == "apis" and len(parts) == 3):
            group, version = ("", "v1") if path == "/api/v1" else (parts[1], parts[2])
            items = [
                {
                    "name": r.plural,
                    "singularName": r.kind.lower(),
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                }
                for r in self.served.values()
                if r.group == group and r.version == version
            ]
            if items:
                return {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": f"{group}/{version}" if group else version,
                    "resources": items,
                }
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def _groups(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for res in self.served.values():
            if res.group and res.version not in groups.setdefault(res.group, []):
                groups[res.group].append(res.version)
        return groups

    def _group(self, name: str) -> dict[str, Any]:
        versions = [{"groupVersion": f"{name}/{v}", "version": v} for v in self._groups()[name]]
        return {"name": name, "versions": versions, "preferredVersion": versions[0]}

    # --- the object store -------------------------------------------------------------------------

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _get(self, res: Resource, key: ObjKey) -> Obj:
        obj = self.store[res.key].get(key)
        if obj is None:
            raise ApiError(404, "NotFound", f'{res.plural} "{key[1]}" not found')
        return obj

    def _list(self, res: Resource, namespace: str | None, selector: str) -> Obj:
        requirements = parse_selector(selector)
        # No copies: the answer is serialised before anything else runs on the loop.
        items = [
            obj
            for (ns, _), obj in self.store[res.key].items()
            if (namespace is None or ns == namespace)
            and selects(requirements, obj["metadata"].get("labels") or {})
        ]
        return {
            "apiVersion": res.api_version,
            "kind": f"{res.kind}List",
            "metadata": {"resourceVersion": str(self._rv)},
            "items": items,
        }

    def _check_namespace(self, res: Resource, namespace: str | None) -> None:
        if not res.namespaced:
            return
        ns = self.store[("", "v1", "namespaces")].get((None, namespace or ""))
        if ns is None:
            raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found')
        if ns["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                "Forbidden",
                f"unable to create new content in namespace {namespace} because it is being terminated",
            )

    def _create(self, res: Resource, namespace: str | None, body: Obj) -> Obj:
        name = body.get("metadata", {}).get("name")
        if not name:
            raise ApiError(422, "Invalid", "metadata.name: Required value")
        if (namespace, name) in self.store[res.key]:
            raise ApiError(409, "AlreadyExists", f'{res.plural} "{name}" already exists')
        self._check_namespace(res, namespace)
        obj = copy.deepcopy(body)
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        meta = obj.setdefault("metadata", {})
        meta.update(
            uid=str(uuid.uuid4()), resourceVersion=self._next_rv(), generation=1, creationTimestamp=_now()
        )
        if namespace is not None:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if res.kind == "Namespace":
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
            obj["status"] = {"phase": "Active"}
        self.store[res.key][(namespace, name)] = obj
        self._emit(res.key, "ADDED", obj)
        return copy.deepcopy(obj)

    def _commit(self, res: Resource, key: ObjKey, old: Obj, new: Obj) -> Obj:
        """Store a new version: a new resourceVersion always, a new generation when the spec changed."""
        meta = new.setdefault("metadata", {})
        for field_name in ("uid", "creationTimestamp", "namespace", "name", "deletionTimestamp"):
            if field_name in old["metadata"]:
                meta[field_name] = old["metadata"][field_name]
        if res.kind == "Namespace":
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = key[1]
        body_changed = _without(old, "metadata", "status") != _without(new, "metadata", "status")
        meta["generation"] = old["metadata"].get("generation", 1) + (1 if body_changed else 0)
        meta["resourceVersion"] = self._next_rv()
        new["apiVersion"], new["kind"] = res.api_version, res.kind
        self.store[res.key][key] = new
        self._emit(res.key, "MODIFIED", new)
        return copy.deepcopy(new)

    def _replace(self, res: Resource, key: ObjKey, body: Obj, subresource: str | None) -> Obj:
        old = self._get(res, key)
        sent_rv = body.get("metadata", {}).get("resourceVersion")
        if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {res.plural} "{key[1]}": '
                "the object has been modified; please apply your changes to the "
                "latest version and try again",
            )
        if subresource == "status":
            new = copy.deepcopy(old)
            new["status"] = copy.deepcopy(body.get("status"))
        else:
            new = copy.deepcopy(body)
            if "status" in old:
                new["status"] = old["status"]
        return self._commit(res, key, old, new)

    def _patch(
        self, res: Resource, key: ObjKey, content_type: str, body: Any, subresource: str | None
    ) -> tuple[int, Obj]:
        content_type = content_type.split(";")[0].strip()
        if content_type == "application/apply-patch+yaml":
            if key not in self.store[res.key]:
                return 201, self._create(res, key[0], body)
            return 200, self._commit(res, key, self._get(res, key), self._applied(self._get(res, key), body))
        if content_type in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            old = self._get(res, key)
            if subresource == "status":
                body = {"status": (body or {}).get("status")}
            return 200, self._commit(res, key, old, merge_patch(copy.deepcopy(old), body))
        raise ApiError(
            415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {content_type}"
        )

    @staticmethod
    def _applied(old: Obj, body: Obj) -> Obj:
        """Apply by the only manager: its fields replace the object's, other metadata is kept."""
        new = {k: copy.deepcopy(v) for k, v in body.items() if k not in ("metadata", "status")}
        meta = copy.deepcopy(old["metadata"])
        applied_meta = body.get("metadata", {})
        for mapping in ("labels", "annotations"):
            if applied_meta.get(mapping):
                meta[mapping] = {**meta.get(mapping, {}), **applied_meta[mapping]}
        new["metadata"] = meta
        if "status" in old:
            new["status"] = old["status"]
        return new

    def _delete(self, res: Resource, key: ObjKey) -> Obj:
        obj = self._get(res, key)
        if obj["metadata"].get("finalizers") or res.kind == "Namespace":
            if not obj["metadata"].get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = _now()
                obj["metadata"]["resourceVersion"] = self._next_rv()
            if res.kind == "Namespace":
                obj["status"] = {"phase": "Terminating"}
                self._drop_namespace_content(key[1])
            self._emit(res.key, "MODIFIED", obj)
            return copy.deepcopy(obj)
        del self.store[res.key][key]
        self._deleted(res.key, obj)
        return obj

    def _drop_namespace_content(self, namespace: str) -> None:
        for res_key, objects in self.store.items():
            for key in [k for k in objects if k[0] == namespace]:
                self._deleted(res_key, objects.pop(key))

    def _deleted(self, res_key: ResKey, obj: Obj) -> None:
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = self._next_rv()
        self._emit(res_key, "DELETED", gone)

    # --- watches ----------------------------------------------------------------------------------

    def _emit(self, res_key: ResKey, kind: str, obj: Obj) -> None:
        rv = int(obj["metadata"]["resourceVersion"])
        snapshot = copy.deepcopy(obj)
        self.events.append((rv, res_key, kind, snapshot))
        for queue in self.watchers.get(res_key, []):
            queue.put_nowait((rv, kind, snapshot))

    async def _watch(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        """A watch: the remembered events after `resourceVersion`, then new ones, as JSON lines."""
        self.calls += 1
        self.by_method["WATCH"] += 1
        parsed = parse_path(raw_request.path)
        res = self.served.get((parsed.group, parsed.version, parsed.plural)) if parsed else None
        if res is None or parsed is None or parsed.name is not None:
            return aiohttp.web.json_response(
                _status(ApiError(404, "NotFound", "the server could not find the requested resource")),
                status=404,
            )
        query = raw_request.query
        since = int(query.get("resourceVersion") or self._rv)
        timeout = float(query.get("timeoutSeconds") or 60)
        queue: asyncio.Queue[tuple[int, str, Obj]] = asyncio.Queue()
        for rv, key, kind, obj in self.events:
            if key == res.key and rv > since:
                queue.put_nowait((rv, kind, obj))
        self.watchers.setdefault(res.key, []).append(queue)
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(raw_request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while (left := deadline - loop.time()) > 0:
                try:
                    rv, kind, obj = await asyncio.wait_for(queue.get(), timeout=left)
                except TimeoutError:
                    break
                namespace = obj["metadata"].get("namespace")
                if parsed.namespace is None or namespace == parsed.namespace:
                    await response.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.watchers[res.key].remove(queue)
        return response

    # --- helpers for the test harness (call through RunningEmulator from other threads) -----------

    def finish_namespace_deletions(self) -> int:
        """Remove Terminating namespaces, as the namespace controller would once they are empty."""
        namespaces = self.store[("", "v1", "namespaces")]
        done = [k for k, ns in namespaces.items() if ns["metadata"].get("deletionTimestamp")]
        for key in done:
            del namespaces[key]
        return len(done)

    def make_vcluster_ready(
        self, namespace: str, name: str, *, server: str = "https://localhost:8443"
    ) -> bool:
        """Play the vCluster controller: write the `vc-<name>` kubeconfig secret and mark the release Ready.

        Works for a Flux HelmRelease `name` in `namespace`; returns False when there is none yet.
        """
        res = self.served[("helm.toolkit.fluxcd.io", "v2", "helmreleases")]
        release = self.store[res.key].get((namespace, name))
        if release is None:
            return False
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": f"vc-{name}",
                "namespace": namespace,
                "labels": {"app": "vcluster", "vcluster-name": name},
            },
            "data": {"config": base64.b64encode(sample_kubeconfig(name, server).encode()).decode()},
        }
        secrets = self.served[("", "v1", "secrets")]
        if (namespace, f"vc-{name}") not in self.store[secrets.key]:
            self._create(secrets, namespace, secret)
        status = {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "InstallSucceeded",
                    "message": "Helm install succeeded",
                    "lastTransitionTime": _now(),
                }
            ],
            "observedGeneration": release["metadata"]["generation"],
        }
        self._commit(res, (namespace, name), release, {**copy.deepcopy(release), "status": status})
        return True

    def make_vcluster_instance_ready(self, namespace: str, name: str) -> bool:
        """The vCluster Platform equivalent: VirtualClusterInstance `status.phase: Ready`."""
        res = self.served[("management.loft.sh", "v1", "virtualclusterinstances")]
        instance = self.store[res.key].get((namespace, name))
        if instance is None:
            return False
        self._commit(
            res, (namespace, name), instance, {**copy.deepcopy(instance), "status": {"phase": "Ready"}}
        )
        return True

    def put_object(self, obj: Obj) -> Obj:
        """Create or overwrite an object directly, as someone else (kubectl, another controller) would."""
        res = self.served_resource(obj["apiVersion"], obj["kind"])
        namespace = obj["metadata"].get("namespace") if res.namespaced else None
        key = (namespace, obj["metadata"]["name"])
        if key in self.store[res.key]:
            return self._commit(res, key, self.store[res.key][key], copy.deepcopy(obj))
        return self._create(res, namespace, obj)

    def get_object(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        res = self.served_resource(api_version, kind)
        obj = self.store[res.key].get((namespace if res.namespaced else None, name))
        return copy.deepcopy(obj) if obj is not None else None

    def edit_object(self, api_version: str, kind: str, name: str, namespace: str | None, patch: Obj) -> Obj:
        """A hand edit: a JSON merge patch."""
        res = self.served_resource(api_version, kind)
        key = (namespace if res.namespaced else None, name)
        old = self._get(res, key)
        return self._commit(res, key, old, merge_patch(copy.deepcopy(old), patch))

    def remove_object(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        """A hand delete."""
        res = self.served_resource(api_version, kind)
        self._delete(res, (namespace if res.namespaced else None, name))

    def objects_of(self, api_version: str, kind: str) -> list[Obj]:
        res = self.served_resource(api_version, kind)
        return [copy.deepcopy(o) for o in self.store[res.key].values()]

    def reset_counters(self) -> None:
        self.calls = self.writes = 0
        self.by_method.clear()
        self.injected.clear()
        self.log.clear()


_REASONS = {
    401: "Unauthorized",
    409: "Conflict",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


def _status(exc: ApiError) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Failure",
        "message": exc.message,
        "reason": exc.reason,
        "code": exc.code,
    }


def _without(obj: Obj, *keys: str) -> Obj:
    return {k: v for k, v in obj.items() if k not in keys}


def sample_kubeconfig(name: str, server: str) -> str:
    """The shape of the kubeconfig vCluster writes to `vc-<name>`."""
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": name,
            "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority-data": "Q0E="}}],
            "users": [
                {"name": name, "user": {"client-certificate-data": "Q0VSVA==", "client-key-data": "S0VZ"}}
            ],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        }
    )


class RunningEmulator:
    """A `KubeEmulator` served on 127.0.0.1 from a background thread with its own event loop.

    Every helper runs on the emulator's loop, so tests can call them from their own thread.
    """

    def __init__(self, emulator: KubeEmulator) -> None:
        self.emulator = emulator
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="kube-emulator", daemon=True)
        self._error: BaseException | None = None

    def start(self) -> RunningEmulator:
        if self._thread.is_alive():
            return self
        self._thread.start()
        self._ready.wait(timeout=10)
        if self._error is not None:
            raise RuntimeError("the Kubernetes emulator failed to start") from self._error
        return self

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported to start()
            self._error = exc
            self._ready.set()
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        # aiohttp's raw server, as kmock.Server uses, without the client session and the process-wide
        # DNS interceptor kmock.Server adds: several emulators may then run and stop in any order.
        async with self.emulator, RawTestServer(self.emulator, host="127.0.0.1") as server:
            self.url = f"http://127.0.0.1:{server.port}"
            self._ready.set()
            await self._stop.wait()

    def stop(self) -> None:
        if self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout=10)

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run `fn(*args, **kwargs)` on the emulator's loop and return its result."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return future.result(timeout=10)

    def __getattr__(self, name: str) -> Any:
        """Expose the emulator's helpers (`put_object`, `make_vcluster_ready`…), run on its loop."""
        attr = getattr(self.emulator, name)
        if not callable(attr):
            return attr
        return lambda *args, **kwargs: self.call(attr, *args, **kwargs)

    def __enter__(self) -> RunningEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_emulator(
    *, crds: Iterable[str] = (), faults: Faults | None = None, server_version: tuple[int, int] = (1, 33)
) -> RunningEmulator:
    """Start an emulator serving the named CRDs (see `CRDS`); stop it with `.stop()`."""
    emulator = KubeEmulator(server_version=server_version, faults=faults)
    emulator.register_crds(*crds)
    return RunningEmulator(emulator).start()
