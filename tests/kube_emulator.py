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
the namespace controller). It also injects faults (`Faults`) and counts calls and writes.

For controllers that watch (gpucloud's Tenant custom resources) it also serves:

- watches (`?watch=1`): events since the given `resourceVersion` from a bounded history, then live ones,
  until `timeoutSeconds`; a `resourceVersion` older than the history (`compact()` plays etcd compaction)
  answers an `ERROR` event with a 410 `Expired` Status, as the real API server does; `drop_watches()` cuts
  every open stream, as a restarted API server or load balancer would; with `bookmarks` on, a watch that
  asked `allowWatchBookmarks=true` gets a BOOKMARK as its timeout ends, as from the API server's watch cache;
- a merge patch carrying `metadata.resourceVersion` is conditional (409 when the object has moved on), as a
  PUT already was;
- custom resources defined by creating a `CustomResourceDefinition` (served from then on), with the status
  subresource when the CRD asks for it (writes to the object keep its status, `/status` writes keep the
  rest; only spec changes bump `generation`);
- finalizers: deleting an object that has some sets `deletionTimestamp`; removing the last one deletes it;
- `SelfSubjectAccessReview`s of resources, answered by the same RBAC rules as the requests;
- Kueue's visibility API once `serve_kueue_visibility()` is called (an aggregated API, served only while its
  APIService is: Kueue's `VisibilityOnDemand` feature gate): a LocalQueue's `pendingworkloads`, computed from
  the stored Workloads in Kueue's order (`_pending_in`).

`start_emulator()` runs it on 127.0.0.1 in a thread with its own event loop, for sync tests.

`start_virtual_cluster()` runs a second stand-in playing a tenant's vCluster API: it serves ServiceAccounts
and
RBAC objects with the bootstrap ClusterRoles (`cluster-admin`, `edit`, `view`), TokenRequest and
SelfSubjectReview, and authenticates and authorises every request as an API server would (`Authenticator`):
static bearer tokens (the admin kubeconfig's), ServiceAccount tokens it minted (refused once the account is
deleted or the token expired), and OpenID ID tokens of a configured issuer (`--oidc-*` flags), checked against
the issuer's keys. RBAC is evaluated over ClusterRoleBindings and RoleBindings (verbs, apiGroups, resources).
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
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp.web
import jwt
import kmock
import requests
import yaml
from aiohttp.test_utils import RawTestServer

T = TypeVar("T")
Obj = dict[str, Any]
ResKey = tuple[str, str, str]  # group ("" for core), version, plural
ObjKey = tuple[str | None, str]  # namespace (None for cluster-scoped), name

KUEUE_VISIBILITY = "visibility.kueue.x-k8s.io"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
HISTORY = 1000  # watch events kept per resource; older resourceVersions answer 410 Gone
Watcher = tuple[ResKey, "str | None", "list[Requirement]", "asyncio.Queue[Obj | None]"]


@dataclass(frozen=True)
class Resource:
    """A resource type the emulated server serves."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = False

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
    _r("v1", "endpoints", "Endpoints", True),
    _r("discovery.k8s.io/v1", "endpointslices", "EndpointSlice", True),
    _r("apps/v1", "deployments", "Deployment", True),
    _r("scheduling.k8s.io/v1", "priorityclasses", "PriorityClass", False),
    _r("networking.k8s.io/v1", "networkpolicies", "NetworkPolicy", True),
    _r("apiextensions.k8s.io/v1", "customresourcedefinitions", "CustomResourceDefinition", False),
)

# Built in since Kubernetes 1.30 (admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy went GA then):
# served when the stand-in's server version is 1.30 or later.
ADMISSION_POLICIES = (
    _r("admissionregistration.k8s.io/v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", False),
    _r(
        "admissionregistration.k8s.io/v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        False,
    ),
)

# What a virtual cluster's API serves on top of BUILTIN (registered by `start_virtual_cluster`).
VIRTUAL = (
    _r("v1", "serviceaccounts", "ServiceAccount", True),
    _r("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", False),
    _r("rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", False),
    _r("rbac.authorization.k8s.io/v1", "roles", "Role", True),
    _r("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", True),
)
_READ = ["get", "list", "watch"]
_WRITE = ["create", "update", "patch", "delete", "deletecollection"]
_WORKLOADS = ["pods", "pods/log", "services", "configmaps", "persistentvolumeclaims", "deployments", "jobs"]
# The bootstrap ClusterRoles, reduced to the resources the stand-in serves (Kubernetes' own are aggregated).
BOOTSTRAP_ROLES: dict[str, list[dict[str, list[str]]]] = {
    "cluster-admin": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
    "edit": [
        {"apiGroups": ["", "apps", "batch"], "resources": [*_WORKLOADS, "secrets"], "verbs": _READ + _WRITE},
        {"apiGroups": [""], "resources": ["namespaces", "resourcequotas", "limitranges"], "verbs": _READ},
    ],
    "view": [
        {"apiGroups": ["", "apps", "batch"], "resources": _WORKLOADS, "verbs": _READ},
        {"apiGroups": [""], "resources": ["namespaces", "resourcequotas", "limitranges"], "verbs": _READ},
    ],
}

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
    # The Gateway API's routes and its Inference Extension's pools (inference endpoints), and KServe's
    # LLMInferenceService.
    "gateway-api-inference": (
        _r("gateway.networking.k8s.io/v1", "httproutes", "HTTPRoute", True),
        _r("inference.networking.k8s.io/v1", "inferencepools", "InferencePool", True),
    ),
    "kserve": (_r("serving.kserve.io/v1alpha2", "llminferenceservices", "LLMInferenceService", True),),
    # Built into Kubernetes 1.34+ (not a CRD there); registered the same way to serve resource.k8s.io/v1.
    "dra": (
        _r("resource.k8s.io/v1", "deviceclasses", "DeviceClass", False),
        _r("resource.k8s.io/v1", "resourceclaimtemplates", "ResourceClaimTemplate", True),
        _r("resource.k8s.io/v1", "resourceclaims", "ResourceClaim", True),
        _r("resource.k8s.io/v1", "resourceslices", "ResourceSlice", False),
    ),
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
    `forbidden` path prefixes answer 403 to every request (and a SelfSubjectAccessReview of their API group
    is refused); `invalid` ones answer 422 to writes, as admission or schema validation would.
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
class UserInfo:
    """Who a request comes from, as authentication found."""

    username: str
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class OidcIssuer:
    """The API server's `--oidc-*` flags."""

    issuer: str
    client_id: str
    username_claim: str = "sub"
    username_prefix: str = "oidc:"
    groups_claim: str = "groups"
    groups_prefix: str = "oidc:"


@dataclass
class Authenticator:
    """Bearer-token authentication as a kube-apiserver does it: static tokens, ServiceAccount tokens it
    minted itself (bound to the account's uid, with an expiry), and ID tokens of one OpenID issuer."""

    tokens: dict[str, UserInfo] = field(default_factory=dict)
    oidc: OidcIssuer | None = None
    minted: dict[str, tuple[str, str, str, float]] = field(
        default_factory=dict
    )  # token -> ns, name, uid, exp
    _jwks: Any = field(default=None, init=False, repr=False)

    def mint(self, namespace: str, name: str, uid: str, seconds: int) -> tuple[str, float]:
        token = f"sa.{uuid.uuid4().hex}{uuid.uuid4().hex}"
        expires = datetime.datetime.now(datetime.UTC).timestamp() + seconds
        self.minted[token] = (namespace, name, uid, expires)
        return token, expires

    def oidc_user(self, token: str) -> UserInfo | None:
        """The user of a valid ID token of the configured issuer for its client id; None otherwise."""
        if self.oidc is None or token.count(".") != 2:
            return None
        if self._jwks is None:
            document = requests.get(f"{self.oidc.issuer}/.well-known/openid-configuration", timeout=5).json()
            self._jwks = jwt.PyJWKClient(document["jwks_uri"])
        try:
            key = self._jwks.get_signing_key_from_jwt(token)
            claims = jwt.decode(
                token, key.key, algorithms=["RS256"], audience=self.oidc.client_id, issuer=self.oidc.issuer
            )
        except jwt.PyJWTError:
            return None
        username = claims.get(self.oidc.username_claim)
        if not username:
            return None
        groups = claims.get(self.oidc.groups_claim) or []
        groups = [groups] if isinstance(groups, str) else groups
        return UserInfo(
            self.oidc.username_prefix + str(username),
            (*(self.oidc.groups_prefix + str(g) for g in groups), "system:authenticated"),
        )


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

    def __init__(
        self,
        *,
        server_version: tuple[int, int] = (1, 33),
        faults: Faults | None = None,
        auth: Authenticator | None = None,
    ) -> None:
        super().__init__()
        self.auth = auth  # None: every request is served (a host cluster's stand-in)
        self.server_version = server_version
        self.faults = faults or Faults()
        self.store: dict[ResKey, dict[ObjKey, Obj]] = {}
        self.served: dict[ResKey, Resource] = {}
        self.calls = 0
        self.writes = 0
        self.by_method: Counter[str] = Counter()
        self.injected: Counter[int | str] = Counter()  # faults served, by status or "timeout"
        self.log: list[tuple[str, str, int]] = []  # (method, path, status)
        self.history: dict[ResKey, list[tuple[int, str, Obj]]] = {}  # (resourceVersion, type, object)
        self.compacted: dict[ResKey, int] = {}  # events up to this resourceVersion are forgotten
        self.watchers: list[Watcher] = []
        self.watch_log: list[dict[str, str]] = []  # every watch request's path and query, in order
        self._rv = 0
        # Pods ("namespace/name") a PodDisruptionBudget protects: their eviction answers 429, as the real
        # API server's does while the budget allows no disruption.
        self.disruption_blocked: set[str] = set()
        # Admission of pod creates, where a test gives the stand-in one (it has none of its own): called with
        # the pod and every stored object, answers the refusals (the first becomes a 403, as the API server's
        # ValidatingAdmissionPolicy plugin answers). See tests/judges/admission.py `admit_stored`.
        self.pod_admission: Callable[[Obj, list[Obj]], list[str]] | None = None
        # The same for DRA ResourceClaims and ResourceClaimTemplates (`admit_stored_claim`).
        self.claim_admission: Callable[[Obj, list[Obj]], list[str]] | None = None
        # A watch asking `allowWatchBookmarks=true` gets a BOOKMARK (the current resourceVersion) as its
        # timeout ends, as the API server's watch cache sends one before it closes the watch. Off unless a
        # test turns it on (most consumers never look at bookmarks).
        self.bookmarks = False
        self.register_resources(BUILTIN)
        if server_version >= (1, 30):
            self.register_resources(ADMISSION_POLICIES)

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
            query = dict(raw_request.query)
            if method == "GET" and query.get("watch") in ("1", "true"):
                if hang:  # a slow answer; a watch's client waits longer than a request's
                    await asyncio.sleep(self.faults.hang_seconds)
                return await self._watch(raw_request, path, query)
            status, payload = self._serve(method, path, dict(raw_request.query), raw_request.headers, body)
        except ApiError as exc:
            status, payload = exc.code, _status(exc)
        # A review (SelfSubjectAccessReview, SelfSubjectReview) is a POST that stores nothing: not a write.
        if method in WRITE_METHODS and status < 300 and not path.rstrip("/").endswith("reviews"):
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
        user = self._authenticate(headers) if self.auth is not None else None
        parsed = parse_path(path)
        if user is not None and parsed is not None and parsed.plural == "selfsubjectreviews":
            return 201, self._self_subject_review(user)
        if parsed is not None and parsed.plural == "selfsubjectaccessreviews" and method == "POST":
            return 201, self._access_review(user, self._decode(body))
        if parsed is None:
            if method != "GET":
                raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed on {path}")
            return 200, self._discovery(path.rstrip("/") or "/")
        res = self.served.get((parsed.group, parsed.version, parsed.plural))
        if res is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        namespace = parsed.namespace if res.namespaced else None
        if user is not None:
            self._authorize(user, method, res, parsed)
        if parsed.group == KUEUE_VISIBILITY and parsed.subresource == "pendingworkloads" and method == "GET":
            return 200, self._pending_workloads(parsed, query)
        if parsed.subresource == "token" and res.kind == "ServiceAccount" and method == "POST":
            return 201, self._token_request(res, (namespace, parsed.name or ""), self._decode(body))
        if parsed.name is None:
            if method == "GET":
                listed = self._list(res, parsed.namespace, query.get("labelSelector", ""))
                return 200, _field_selected(listed, query.get("fieldSelector", ""))
            if method == "POST":
                return 201, self._create(
                    res, namespace, self._decode(body), dry_run=query.get("dryRun") == "All"
                )
            raise ApiError(405, "MethodNotAllowed", f"{method} on a collection")
        key = (namespace, parsed.name)
        if res.kind == "Pod" and parsed.subresource == "eviction" and method == "POST":
            return self._evict(res, key)
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

    # --- authentication and RBAC (a virtual cluster's stand-in) -----------------------------------

    def _authenticate(self, headers: Any) -> UserInfo:
        assert self.auth is not None
        header = headers.get("Authorization", "")
        token = header[7:].strip() if header.startswith("Bearer ") else ""
        user = self._user_of(token) if token else None
        if user is None:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        return user

    def _user_of(self, token: str) -> UserInfo | None:
        assert self.auth is not None
        if token in self.auth.tokens:
            return self.auth.tokens[token]
        if token in self.auth.minted:
            namespace, name, uid, expires = self.auth.minted[token]
            account = self.store[("", "v1", "serviceaccounts")].get((namespace, name))
            # A ServiceAccount token is bound to the account's uid: deleting (or re-creating) it ends it.
            if account is None or account["metadata"]["uid"] != uid:
                return None
            if expires < datetime.datetime.now(datetime.UTC).timestamp():
                return None
            return UserInfo(
                f"system:serviceaccount:{namespace}:{name}",
                ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
            )
        return self.auth.oidc_user(token)

    def _self_subject_review(self, user: UserInfo) -> Obj:
        return {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "SelfSubjectReview",
            "metadata": {"creationTimestamp": _now()},
            "status": {"userInfo": {"username": user.username, "groups": list(user.groups)}},
        }

    def _token_request(self, res: Resource, key: ObjKey, body: Obj) -> Obj:
        if self.auth is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        account = self._get(res, key)
        seconds = int(((body or {}).get("spec") or {}).get("expirationSeconds") or 3600)
        token, expires = self.auth.mint(key[0] or "", key[1], account["metadata"]["uid"], seconds)
        return {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "metadata": {"name": key[1], "namespace": key[0]},
            "spec": {"expirationSeconds": seconds},
            "status": {
                "token": token,
                "expirationTimestamp": datetime.datetime.fromtimestamp(expires, datetime.UTC).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"
                ),
            },
        }

    @staticmethod
    def _verb(method: str, parsed: Path) -> str:
        if method == "GET":
            return "get" if parsed.name else "list"
        return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, "")

    def _access_review(self, user: UserInfo | None, review: Obj) -> Obj:
        """A SelfSubjectAccessReview of a resource: allowed as `_authorize` would allow the request
        (everything for the unauthenticated host cluster's admin)."""
        attributes = (review.get("spec") or {}).get("resourceAttributes") or {}
        group, verb, plural = (
            attributes.get("group", ""),
            attributes.get("verb", ""),
            attributes.get("resource", ""),
        )
        allowed = user is None or "system:masters" in user.groups
        if group and any(p.startswith(f"/apis/{group}/") for p in self.faults.forbidden):
            allowed = False  # paths of the group a test forbids: a review answers as RBAC would refuse them
        if not allowed and user is not None:
            namespace = attributes.get("namespace") or None
            rules = self._rules_of(user, namespace)
            allowed = any(self._rule_allows(rule, verb, group, plural) for rule in rules)
        return {**review, "status": {"allowed": allowed}}

    def _authorize(self, user: UserInfo, method: str, res: Resource, parsed: Path) -> None:
        if "system:masters" in user.groups:
            return
        verb = self._verb(method, parsed)
        resource = res.plural + (f"/{parsed.subresource}" if parsed.subresource else "")
        if not any(
            self._rule_allows(rule, verb, res.group, resource)
            for rule in self._rules_of(user, parsed.namespace if res.namespaced else None)
        ):
            where = f' in the namespace "{parsed.namespace}"' if parsed.namespace and res.namespaced else ""
            raise ApiError(
                403,
                "Forbidden",
                f'{res.plural} is forbidden: User "{user.username}" cannot {verb} resource "{resource}" '
                f'in API group "{res.group}"{where}',
            )

    @staticmethod
    def _rule_allows(rule: Obj, verb: str, group: str, resource: str) -> bool:
        def has(values: list[str] | None, wanted: str) -> bool:
            return bool(values) and ("*" in values or wanted in values)  # type: ignore[operator]

        return (
            has(rule.get("verbs"), verb)
            and has(rule.get("apiGroups"), group)
            and has(rule.get("resources"), resource)
        )

    def _rules_of(self, user: UserInfo, namespace: str | None) -> Iterable[Obj]:
        rbac = "rbac.authorization.k8s.io"
        bindings = list(self.store[(rbac, "v1", "clusterrolebindings")].values())
        if namespace:
            bindings += [
                b for (ns, _), b in self.store[(rbac, "v1", "rolebindings")].items() if ns == namespace
            ]
        for binding in bindings:
            if not any(self._is_subject(user, subject) for subject in binding.get("subjects") or []):
                continue
            ref = binding.get("roleRef") or {}
            if ref.get("kind") == "ClusterRole":
                role = self.store[(rbac, "v1", "clusterroles")].get((None, ref.get("name", "")))
            else:
                role = self.store[(rbac, "v1", "roles")].get((namespace, ref.get("name", "")))
            yield from (role or {}).get("rules") or []

    @staticmethod
    def _is_subject(user: UserInfo, subject: Obj) -> bool:
        kind, name = subject.get("kind"), subject.get("name")
        if kind == "User":
            return bool(name == user.username)
        if kind == "Group":
            return name in user.groups
        if kind == "ServiceAccount":
            return user.username == f"system:serviceaccount:{subject.get('namespace')}:{name}"
        return False

    def bootstrap_rbac(self) -> None:
        """The ClusterRoles an API server creates at start (`kubernetes.io/bootstrapping: rbac-defaults`)."""
        res = self.served[("rbac.authorization.k8s.io", "v1", "clusterroles")]
        for name, rules in BOOTSTRAP_ROLES.items():
            if (None, name) not in self.store[res.key]:
                role = {
                    "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
                    "rules": rules,
                }
                self._create(res, None, role)

    # --- Kueue's visibility API -------------------------------------------------------------------

    def serve_kueue_visibility(self, version: str = "v1beta2") -> None:
        """Serve Kueue's visibility API in `version`, as Kueue does while its APIService is available."""
        self.register_resources(
            (
                Resource(KUEUE_VISIBILITY, version, "localqueues", "LocalQueue", True),
                Resource(KUEUE_VISIBILITY, version, "clusterqueues", "ClusterQueue", False),
            )
        )

    def _pending_workloads(self, parsed: Path, query: dict[str, str]) -> Obj:
        """A LocalQueue's `PendingWorkloadsSummary` (kubernetes-sigs/kueue apis/visibility/v1beta2/types.go):
        positions counted from 0, `offset` and `limit` (default 1000) honoured."""
        local_queues = self.store.get(("kueue.x-k8s.io", "v1beta2", "localqueues"), {})
        local_queue = local_queues.get((parsed.namespace, parsed.name or ""))
        if local_queue is None:
            raise ApiError(404, "NotFound", f'localqueues.kueue.x-k8s.io "{parsed.name}" not found')
        cluster_queue = (local_queue.get("spec") or {}).get("clusterQueue")
        in_cluster_queue = self._pending_in(cluster_queue, local_queues)
        items, in_local_queue = [], 0
        for place, workload in enumerate(in_cluster_queue):
            meta = workload["metadata"]
            if (meta.get("namespace"), workload["spec"].get("queueName")) != (parsed.namespace, parsed.name):
                continue
            items.append(
                {
                    "metadata": {k: meta[k] for k in ("name", "namespace", "creationTimestamp") if k in meta},
                    "priority": int(workload["spec"].get("priority") or 0),
                    "localQueueName": parsed.name,
                    "positionInClusterQueue": place,
                    "positionInLocalQueue": in_local_queue,
                }
            )
            in_local_queue += 1
        offset, limit = int(query.get("offset") or 0), int(query.get("limit") or 1000)
        return {
            "apiVersion": f"{KUEUE_VISIBILITY}/{parsed.version}",
            "kind": "PendingWorkloadsSummary",
            "metadata": {"creationTimestamp": None},
            "items": items[offset : offset + limit],
        }

    def _pending_in(self, cluster_queue: str | None, local_queues: dict[ObjKey, Obj]) -> list[Obj]:
        """The pending Workloads of a ClusterQueue in Kueue's order (BestEffortFIFO): higher `spec.priority`
        first, then the queue-order timestamp: when it was evicted for a requeued one (KEP-1282), else its
        creation. Pending: active, neither quota reserved nor finished. (Kueue also keeps inadmissible ones
        apart; the stand-in does not.)"""

        def holds(workload: Obj, kind: str) -> bool:
            conditions = (workload.get("status") or {}).get("conditions") or []
            return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)

        def queued_at(workload: Obj) -> str:
            for c in (workload.get("status") or {}).get("conditions") or []:
                if c.get("type") == "Evicted" and c.get("status") == "True" and c.get("lastTransitionTime"):
                    return str(c["lastTransitionTime"])
            return str(workload["metadata"].get("creationTimestamp") or "")

        pending = []
        for (namespace, _), workload in self.store.get(
            ("kueue.x-k8s.io", "v1beta2", "workloads"), {}
        ).items():
            spec = workload.get("spec") or {}
            local_queue = local_queues.get((namespace, spec.get("queueName") or ""))
            if local_queue is None or (local_queue.get("spec") or {}).get("clusterQueue") != cluster_queue:
                continue
            if spec.get("active") is False or holds(workload, "QuotaReserved") or holds(workload, "Finished"):
                continue
            pending.append(workload)
        return sorted(
            pending,
            key=lambda w: (-int(w["spec"].get("priority") or 0), queued_at(w), w["metadata"]["name"]),
        )

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

    def _create(self, res: Resource, namespace: str | None, body: Obj, *, dry_run: bool = False) -> Obj:
        name = body.get("metadata", {}).get("name")
        if not name:
            raise ApiError(422, "Invalid", "metadata.name: Required value")
        if (namespace, name) in self.store[res.key]:
            raise ApiError(409, "AlreadyExists", f'{res.plural} "{name}" already exists')
        self._check_namespace(res, namespace)
        if res.kind == "Pod" and self.pod_admission is not None:
            pod = copy.deepcopy(body)
            pod.setdefault("metadata", {})["namespace"] = namespace
            stored = [o for objects in self.store.values() for o in objects.values()]
            refusals = self.pod_admission(pod, stored)
            if refusals:
                raise ApiError(403, "Forbidden", f'pods "{name}" is forbidden: {refusals[0]}')
        if res.kind in ("ResourceClaim", "ResourceClaimTemplate") and self.claim_admission is not None:
            claim = copy.deepcopy(body) | {"kind": res.kind}
            claim.setdefault("metadata", {})["namespace"] = namespace
            stored = [o for objects in self.store.values() for o in objects.values()]
            if refusals := self.claim_admission(claim, stored):
                raise ApiError(403, "Forbidden", f'{res.plural} "{name}" is forbidden: {refusals[0]}')
        if dry_run:  # admitted and validated, not stored (a server-side dry run)
            return copy.deepcopy(body)
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
        if res.kind == "CustomResourceDefinition":
            self._serve_crd(obj)
        self.store[res.key][(namespace, name)] = obj
        self._emit(res, "ADDED", obj)
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
        if res.kind == "CustomResourceDefinition":
            self._serve_crd(new)
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and res.kind != "Namespace":
            del self.store[res.key][key]  # the last finalizer is gone: the deletion completes
            self._emit(res, "DELETED", new)
            return copy.deepcopy(new)
        self.store[res.key][key] = new
        self._emit(res, "MODIFIED", new)
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
            sent_rv = ((body or {}).get("metadata") or {}).get("resourceVersion")
            if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:  # a precondition, as on PUT
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {res.plural} "{key[1]}": '
                    "the object has been modified; please apply your changes to the "
                    "latest version and try again",
                )
            if subresource == "status":
                body = {"status": (body or {}).get("status")}
            elif res.status_subresource and isinstance(body, dict):
                body = _without(body, "status")  # only /status writes the status
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
        obj = copy.deepcopy(self._get(res, key))  # a new version: the watch history keeps the old one
        if obj["metadata"].get("finalizers") or res.kind == "Namespace":
            if not obj["metadata"].get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = _now()
                obj["metadata"]["resourceVersion"] = self._next_rv()
            if res.kind == "Namespace":
                obj["status"] = {"phase": "Terminating"}
                self._drop_namespace_content(key[1])
            self.store[res.key][key] = obj
            self._emit(res, "MODIFIED", obj)
            return copy.deepcopy(obj)
        del self.store[res.key][key]
        obj["metadata"]["resourceVersion"] = self._next_rv()  # a deletion is a new version, as in etcd
        self._emit(res, "DELETED", obj)
        return obj

    def _drop_namespace_content(self, namespace: str) -> None:
        for res_key, objects in self.store.items():
            for key in [k for k in objects if k[0] == namespace]:
                gone = copy.deepcopy(objects.pop(key))
                gone["metadata"]["resourceVersion"] = self._next_rv()
                self._emit(self.served[res_key], "DELETED", gone)

    # --- custom resource definitions and watches ---------------------------------------------------

    def _serve_crd(self, crd: Obj) -> None:
        """Serve what a CustomResourceDefinition defines, as the API server does once it is established."""
        spec = crd.get("spec", {})
        names = spec.get("names", {})
        self.register_resources(
            Resource(
                spec.get("group", ""),
                version["name"],
                names.get("plural", ""),
                names.get("kind", ""),
                spec.get("scope") == "Namespaced",
                "status" in (version.get("subresources") or {}),
            )
            for version in spec.get("versions", [])
            if version.get("served", True)
        )

    def _emit(self, res: Resource, kind: str, obj: Obj) -> None:
        """Record a watch event and hand it to every open watch it matches."""
        rv = int(obj["metadata"]["resourceVersion"])
        history = self.history.setdefault(res.key, [])
        history.append((rv, kind, obj))
        if len(history) > HISTORY:
            self.compacted[res.key] = history.pop(0)[0]
        for res_key, namespace, requirements, queue in self.watchers:
            if res_key == res.key and self._matches(obj, namespace, requirements):
                queue.put_nowait({"type": kind, "object": copy.deepcopy(obj)})

    @staticmethod
    def _matches(obj: Obj, namespace: str | None, requirements: list[Requirement]) -> bool:
        meta = obj["metadata"]
        return (namespace is None or meta.get("namespace") == namespace) and selects(
            requirements, meta.get("labels") or {}
        )

    async def _watch(
        self, raw_request: aiohttp.web.BaseRequest, path: str, query: dict[str, str]
    ) -> aiohttp.web.StreamResponse:
        """A watch stream: one JSON event per line, until `timeoutSeconds` or `drop_watches()`."""
        self.watch_log.append({"path": path, **query})
        parsed = parse_path(path)
        res = self.served.get((parsed.group, parsed.version, parsed.plural)) if parsed else None
        if parsed is None or res is None or parsed.name is not None:
            error = ApiError(404, "NotFound", "the server could not find the requested resource")
            self.log.append(("WATCH", path, 404))
            return aiohttp.web.json_response(_status(error), status=404)
        namespace = parsed.namespace if res.namespaced else None
        requirements = parse_selector(query.get("labelSelector", ""))
        queue: asyncio.Queue[Obj | None] = asyncio.Queue()
        since = query.get("resourceVersion") or "0"
        if since == "0":  # no version: the current objects as ADDED, then what happens next
            for obj in self.store[res.key].values():
                if self._matches(obj, namespace, requirements):
                    queue.put_nowait({"type": "ADDED", "object": copy.deepcopy(obj)})
        elif int(since) < self.compacted.get(res.key, 0):
            expired = ApiError(410, "Expired", f"too old resource version: {since} ({self._rv})")
            queue.put_nowait({"type": "ERROR", "object": _status(expired)})
            queue.put_nowait(None)
        else:
            for rv, kind, obj in self.history.get(res.key, []):
                if rv > int(since) and self._matches(obj, namespace, requirements):
                    queue.put_nowait({"type": kind, "object": copy.deepcopy(obj)})
        watcher: Watcher = (res.key, namespace, requirements, queue)
        self.watchers.append(watcher)
        self.log.append(("WATCH", path, 200))  # in the log as WATCH, to tell it from a list
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(raw_request)
        deadline = asyncio.get_running_loop().time() + float(query.get("timeoutSeconds") or 1800)
        try:
            while (left := deadline - asyncio.get_running_loop().time()) > 0:
                try:
                    event = await asyncio.wait_for(queue.get(), timeout=left)
                except TimeoutError:
                    event = self._bookmark(res, query)
                    if event is not None:
                        await response.write(json.dumps(event).encode() + b"\n")
                    break
                if event is None:
                    break
                await response.write(json.dumps(event).encode() + b"\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.watchers.remove(watcher)
        await response.write_eof()
        return response

    def _bookmark(self, res: Resource, query: dict[str, str]) -> Obj | None:
        """The BOOKMARK a watch ending at its timeout gets, when asked for and turned on (`bookmarks`)."""
        if not self.bookmarks or query.get("allowWatchBookmarks") != "true":
            return None
        meta = {"resourceVersion": str(self._rv)}
        bookmark = {"apiVersion": res.api_version, "kind": res.kind, "metadata": meta}
        return {"type": "BOOKMARK", "object": bookmark}

    def _evict(self, res: Resource, key: ObjKey) -> tuple[int, Obj]:
        """The Eviction API: the pod goes unless a disruption budget protects it (429)."""
        self._get(res, key)
        if f"{key[0]}/{key[1]}" in self.disruption_blocked:
            raise ApiError(
                429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget."
            )
        self._delete(res, key)
        return 201, {"apiVersion": "v1", "kind": "Status", "status": "Success"}

    # --- helpers for the test harness (call through RunningEmulator from other threads) -----------

    def set_node_condition(
        self, node: str, kind: str, status: str, reason: str = "", message: str = ""
    ) -> Obj:
        """Set a condition on a node's status, as the kubelet, Node Problem Detector or NVSentinel would."""
        res = self.served_resource("v1", "Node")
        old = self._get(res, (None, node))
        new = copy.deepcopy(old)
        conditions = [c for c in (new.setdefault("status", {}).get("conditions") or []) if c["type"] != kind]
        conditions.append(
            {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": _now(),
            }
        )
        new["status"]["conditions"] = conditions
        return self._commit(res, (None, node), old, new)

    def finish_namespace_deletions(self) -> int:
        """Remove Terminating namespaces, as the namespace controller would once they are empty."""
        namespaces = self.store[("", "v1", "namespaces")]
        done = [k for k, ns in namespaces.items() if ns["metadata"].get("deletionTimestamp")]
        for key in done:
            del namespaces[key]
        return len(done)

    def make_vcluster_ready(
        self, namespace: str, name: str, *, server: str = "https://localhost:8443", token: str = ""
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
            "data": {"config": base64.b64encode(sample_kubeconfig(name, server, token).encode()).decode()},
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

    def play_gpu_operator(
        self,
        node: str,
        *,
        mig: str = "success",
        namespace: str = "gpu-operator",
        mig_configmap: str = "gpucloud-mig-config",
        plugin_configmap: str = "gpucloud-device-plugin-config",
    ) -> Obj:
        """Play the GPU Operator's MIG manager and device plugin on one node, as they react to its labels.

        MIG manager: reads the config its `nvidia.com/mig.config` label names from the mig-parted file (key
        `config.yaml` of `mig_configmap`) and sets `nvidia.com/mig.config.state` to `mig` (`success` or
        `failed`; `failed` too when the file lacks the config). On success the device plugin (strategy mixed)
        advertises the layout: `nvidia.com/mig-<profile>` per slice, `nvidia.com/gpu` per GPU left whole.
        Device plugin: the `nvidia.com/device-plugin.config` label picks a key of `plugin_configmap`; with
        time-slicing into N replicas (renameByDefault) the whole GPUs become N × `nvidia.com/gpu.shared`,
        and GPU feature discovery labels `nvidia.com/gpu.replicas=N`. Returns the node.
        """
        res = self.served[("", "v1", "nodes")]
        old = self._get(res, (None, node))
        new = copy.deepcopy(old)
        labels = new["metadata"].setdefault("labels", {})
        allocatable = new.setdefault("status", {}).setdefault("allocatable", {})
        gpus = int(labels.get("nvidia.com/gpu.count", "0"))
        whole = int(allocatable.get("nvidia.com/gpu", allocatable.get("nvidia.com/gpu.shared", gpus)) or 0)
        name = labels.get("nvidia.com/mig.config")
        if name:
            configs = self._config_yaml(namespace, mig_configmap, "config.yaml").get("mig-configs") or {}
            if name == "all-disabled":
                configs.setdefault(name, [{"devices": "all", "mig-enabled": False}])
            if name not in configs or mig != "success":
                labels["nvidia.com/mig.config.state"] = "failed"
            else:
                labels["nvidia.com/mig.config.state"] = "success"
                slices, whole = _mig_slices(configs[name], gpus)
                for key in [k for k in allocatable if k.startswith("nvidia.com/mig-")]:
                    del allocatable[key]
                allocatable.update({f"nvidia.com/mig-{p}": str(n) for p, n in slices.items()})
        replicas = 1
        key = labels.get("nvidia.com/device-plugin.config")
        if key:
            config = self._config_yaml(namespace, plugin_configmap, key)
            sliced = (config.get("sharing") or {}).get("timeSlicing") or {}
            for resource in sliced.get("resources") or []:
                if resource.get("name") == "nvidia.com/gpu":
                    replicas = int(resource.get("replicas", 1))
        allocatable.pop("nvidia.com/gpu.shared", None)
        if replicas > 1:
            allocatable["nvidia.com/gpu.shared"] = str(whole * replicas)
            allocatable["nvidia.com/gpu"] = "0"
        else:
            allocatable["nvidia.com/gpu"] = str(whole)
        labels["nvidia.com/gpu.replicas"] = str(replicas)
        return self._commit(res, (None, node), old, new)

    def _config_yaml(self, namespace: str, name: str, key: str) -> Obj:
        configmap = self.store[("", "v1", "configmaps")].get((namespace, name)) or {}
        return yaml.safe_load((configmap.get("data") or {}).get(key) or "") or {}

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

    def compact(self) -> int:
        """Forget the watch history, as etcd compaction does: a watch resuming from any version seen so
        far answers 410 Gone (the compaction revision is a new one)."""
        revision = int(self._next_rv())
        for key in self.store:
            self.compacted[key] = revision
            self.history[key] = []
        return self._rv

    def drop_watches(self) -> int:
        """Close every open watch stream (an API server restart); returns how many there were."""
        for *_, queue in self.watchers:
            queue.put_nowait(None)
        return len(self.watchers)

    def open_watches(self) -> int:
        return len(self.watchers)

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


def _mig_slices(entries: list[Obj], gpus: int) -> tuple[Counter[str], int]:
    """Slices per profile and GPUs left whole under a mig-parted named config (a list of device entries)."""
    layout: dict[int, dict[str, int]] = {}
    for entry in entries:
        devices = range(gpus) if entry.get("devices") == "all" else entry.get("devices") or []
        for index in devices:
            layout[int(index)] = dict(entry.get("mig-devices") or {}) if entry.get("mig-enabled") else {}
    slices: Counter[str] = Counter()
    for index in range(gpus):
        slices.update(layout.get(index, {}))
    return slices, sum(1 for index in range(gpus) if not layout.get(index))


def gpu_node(name: str, product: str = "NVIDIA-H200", gpus: int = 8, **labels: str) -> Obj:
    """A GPU node as the GPU Operator labels it: product, count, MIG-capable, all GPUs whole."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": product,
                "nvidia.com/gpu.count": str(gpus),
                "nvidia.com/mig.capable": "true",
                "nvidia.com/mig.strategy": "mixed",
                **labels,
            },
        },
        "status": {"allocatable": {"cpu": "96", "memory": "1024Gi", "nvidia.com/gpu": str(gpus)}},
    }


def gpu_pod(name: str, namespace: str, node: str, resource: str = "nvidia.com/gpu", units: int = 1) -> Obj:
    """A running pod holding GPU resources on a node."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "main", "image": "cuda", "resources": {"limits": {resource: str(units)}}}
            ],
        },
        "status": {"phase": "Running"},
    }


def _field_selected(listed: Obj, selector: str) -> Obj:
    """The one field selector gpucloud uses, `spec.nodeName=<node>` (pods of a node); others are ignored."""
    wanted = dict(part.split("=", 1) for part in selector.split(",") if "=" in part)
    node = wanted.get("spec.nodeName")
    if node is None:
        return listed
    items = [o for o in listed["items"] if (o.get("spec") or {}).get("nodeName") == node]
    return {**listed, "items": items}


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


def sample_kubeconfig(name: str, server: str, token: str = "") -> str:
    """The shape of the kubeconfig vCluster writes to `vc-<name>` (with `token`: the admin's bearer token, as
    `exportKubeConfig.serviceAccount` writes it, so that a virtual-cluster stand-in can authenticate it)."""
    if token:
        return yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": name,
                "clusters": [
                    {"name": name, "cluster": {"server": server, "certificate-authority-data": "Q0E="}}
                ],
                "users": [{"name": name, "user": {"token": token}}],
                "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            }
        )
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


VCLUSTER_ADMIN_TOKEN = "vcluster-admin-token-7d1e"


def start_virtual_cluster(*, oidc: OidcIssuer | None = None) -> RunningEmulator:
    """Start a stand-in for a tenant's vCluster API: RBAC, ServiceAccounts, TokenRequest, authentication.

    `VCLUSTER_ADMIN_TOKEN` is its admin (`system:masters`): pass it to `make_vcluster_ready(token=…)` on the
    host stand-in, so the `vc-<name>` secret names this server and that credential.
    """
    auth = Authenticator(
        tokens={VCLUSTER_ADMIN_TOKEN: UserInfo("kubernetes-admin", ("system:masters",))}, oidc=oidc
    )
    emulator = KubeEmulator(auth=auth)
    emulator.register_resources(VIRTUAL)
    emulator.bootstrap_rbac()
    return RunningEmulator(emulator).start()
