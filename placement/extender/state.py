"""The kube-scheduler HTTP extender protocol over the placement engine: pure, no Django, no HTTP server.

kube-scheduler (``extenders:`` in its ``KubeSchedulerConfiguration``, ``nodeCacheCapable: true``) POSTs
``ExtenderArgs`` ``{"Pod": <v1.Pod>, "NodeNames": [...]}`` to ``…/filter`` and ``…/prioritize``:

- ``filter`` answers ``ExtenderFilterResult``: the nodes where the engine's rules let the pod land now (CPU,
  memory, GPUs with enough free milli, GPU model, health, the tenants' sharing rules, a free instance of a
  MIG pod's profile), the others in ``FailedNodes`` with the reason, or in ``FailedAndUnresolvableNodes``
  when preempting pods there could not help (wrong GPU model, quarantined, too small even when empty).
  Nodes the engine does not know (no GPU) pass untouched: not gpucloud's business.
- ``prioritize`` answers a ``HostPriorityList``: the node the engine's policy chooses (``Policy.choose``, the
  code the benchmarks measure) scores ``MaxExtenderPriority`` (10), every other candidate its policy score
  scaled to 0-9. The choice is *assumed* at once (booked in the engine, as kube-scheduler's own cache assumes
  a pod before binding), so the next pod is placed against it without waiting for the cluster to report the
  binding; the host cluster's list and watch then confirm it (:meth:`Extender.observe`), move it to where it
  really went, or drop it once ``assume_seconds`` pass unconfirmed.

Pods are read as kube-scheduler sends them: CPU and memory requests (``max(sum of containers, largest init
container)``), whole GPUs from ``nvidia.com/gpu``, a fraction of one GPU from the ``gpucloud.io/gpu-milli``
annotation or HAMi's ``nvidia.com/gpucores`` (percent), and the GPU models a pod accepts from
``nvidia.com/gpu.product`` in its nodeSelector or required node affinity (``In``), and one MIG instance
from ``nvidia.com/mig-<profile>: 1``. Bad input raises :class:`BadRequest` (the server answers 400);
nothing here raises anything else for any JSON.

Tenancy: a pod in a namespace the host cluster's feed names as a tenant's (:meth:`Extender.set_tenancy`,
from the namespace's ``gpucloud.io/tenant`` and trust-tier labels) is that tenant's: a standard tenant's
GPUs are its own, trusted tenants share among themselves, a pod of no tenant takes no tenant's GPU
(``Fleet.usable_gpus``), and an isolated tenant, which has no node pool of its own on a host cluster,
shares no node with another tenant. MIG: a node's instances of a profile are what it advertises
(allocatable ``nvidia.com/mig-<profile>``, :meth:`Extender.set_mig_allocatable`) less the MIG pods booked
on it; a MIG pod is packed onto the node with the fewest free instances, not ranked by the policy.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

import numpy as np

from placement.engine.errors import EngineError, UnknownGpuModel
from placement.engine.fleet import MILLI, NodeSpec, PodRequest, Tier
from placement.engine.placer import Engine
from placement.engine.policies import Policy

MAX_PRIORITY = 10  # kube-scheduler's MaxExtenderPriority
GPU = "nvidia.com/gpu"
GPU_CORES = "nvidia.com/gpucores"  # HAMi: percent of one GPU's compute
GPU_MILLI = "gpucloud.io/gpu-milli"  # annotation: thousandths of one GPU
MIG = "nvidia.com/mig-"  # + profile: one MIG instance (the GPU Operator's mixed strategy)
MODEL_LABEL = "nvidia.com/gpu.product"
MAX_BODY = 8 * 2**20
VERBS = ("filter", "prioritize")
HOPELESS = 3  # reason codes below this: evicting pods on the node could never make room
_SUFFIX = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


class BadRequest(EngineError):
    """ExtenderArgs the extender cannot read; answered with 400 and this message."""


def quantity(value: Any, where: str) -> Decimal:
    """A Kubernetes quantity (``"500m"``, ``"2"``, ``"16Gi"``, ``"1e3"``, a JSON number) as a Decimal."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise BadRequest(f"{value!r} is not a quantity", where)
    text = str(value).strip()
    number, suffix = text, ""
    for s in sorted(_SUFFIX, key=len, reverse=True):
        if s and text.endswith(s):
            number, suffix = text[: -len(s)], s
            break
    try:
        amount = Decimal(number) * _SUFFIX[suffix]
    except (ArithmeticError, ValueError):  # InvalidOperation, and Overflow for "1e999999999"
        raise BadRequest(f"{value!r} is not a quantity", where) from None
    if not amount.is_finite() or amount < 0 or amount > 2**62:
        raise BadRequest(f"{value!r} is out of range", where)
    return amount


def _resources(container: Mapping[str, Any], where: str) -> dict[str, Decimal]:
    """Requests of one container; a limit stands in for a missing request, as the API server defaults it."""
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise BadRequest("resources must be an object", where)
    merged: dict[str, Any] = {}
    for part in ("limits", "requests"):
        values = resources.get(part) or {}
        if not isinstance(values, Mapping):
            raise BadRequest(f"resources.{part} must be an object", where)
        merged.update(values)
    return {str(k): quantity(v, f"{where}: {k}") for k, v in merged.items()}


def _containers(spec: Mapping[str, Any], key: str, where: str) -> list[dict[str, Decimal]]:
    items = spec.get(key) or []
    if not isinstance(items, list) or not all(isinstance(c, Mapping) for c in items):
        raise BadRequest(f"spec.{key} must be a list of containers", where)
    return [_resources(c, f"{where} {key}[{i}]") for i, c in enumerate(items)]


Requests = tuple[list[dict[str, Decimal]], list[dict[str, Decimal]]]  # containers', init containers'


def _requests(spec: Mapping[str, Any], where: str) -> Requests:
    """Every container's and init container's requests, read once per pod."""
    return _containers(spec, "containers", where), _containers(spec, "initContainers", where)


def _effective(requests: Requests, name: str) -> Decimal:
    """The scheduler's view of a request: max(sum over containers, largest init container)."""
    main, init = requests
    total = sum((c.get(name, Decimal(0)) for c in main), Decimal(0))
    return max([total, *(c.get(name, Decimal(0)) for c in init)])


def _mig_profile(requests: Requests, where: str) -> str:
    """The MIG profile of the one instance a pod asks for (``nvidia.com/mig-1g.10gb: 1``), or ``""``."""
    names = sorted({k for c in requests[0] + requests[1] for k in c if k.startswith(MIG)})
    asked = {n: amount for n in names if (amount := _effective(requests, n))}
    if not asked:
        return ""
    (resource, amount), *more = asked.items()
    profile = resource.removeprefix(MIG)
    if more or amount != 1 or not profile:  # the engine's MIG pod is one instance of one profile
        wanted = ", ".join(f"{n}: {a}" for n, a in asked.items())
        raise BadRequest(f"a pod may ask for one MIG instance of one profile, not {wanted}", where)
    return profile


def _object(value: Any, field: str, where: str) -> Mapping[str, Any]:
    """An optional object of the pod: {} when absent, BadRequest when it is something else."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BadRequest(f"{field} must be an object", where)
    return value


def _list(value: Any, field: str, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadRequest(f"{field} must be a list", where)
    return value


def _required_terms(spec: Mapping[str, Any], where: str) -> tuple[str, list[Any]]:
    """The pod's required node-affinity terms and where they are: every level may be absent, and is an object
    (the terms a list) where present."""
    value, path = spec, "spec"
    for key in ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"):
        path += f".{key}"
        value = _object(value.get(key), path, where)
    path += ".nodeSelectorTerms"
    return path, _list(value.get("nodeSelectorTerms"), path, where)


def _models(spec: Mapping[str, Any], where: str) -> frozenset[str]:
    """GPU models the pod accepts: nodeSelector, else the union over required node-affinity terms (``In``)."""
    selector = spec.get("nodeSelector") or {}
    if isinstance(selector, Mapping) and isinstance(selector.get(MODEL_LABEL), str):
        return frozenset([selector[MODEL_LABEL]])
    path, terms = _required_terms(spec, where)
    models: set[str] = set()
    for i, term in enumerate(terms):
        at = f"{path}[{i}].matchExpressions"
        for j, expr in enumerate(
            _list(_object(term, f"{path}[{i}]", where).get("matchExpressions"), at, where)
        ):
            expr = _object(expr, f"{at}[{j}]", where)
            if expr.get("key") == MODEL_LABEL and expr.get("operator") == "In":
                models.update(str(v) for v in _list(expr.get("values"), f"{at}[{j}].values", where))
    return frozenset(models)


def pod_key(pod: Mapping[str, Any]) -> str:
    """``namespace/name``: the engine's pod name."""
    meta = pod.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise BadRequest("Pod.metadata.name is missing", "Pod")
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


def pod_request(pod: Any) -> PodRequest:
    """What a v1.Pod asks of the engine (see the module docstring)."""
    if not isinstance(pod, Mapping):
        raise BadRequest("Pod must be a v1.Pod object", "Pod")
    name = pod_key(pod)
    spec = pod.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise BadRequest("Pod.spec must be an object", name)
    requests = _requests(spec, name)
    cpu = _effective(requests, "cpu") * 1000
    memory = _effective(requests, "memory") / 2**20
    gpus = _effective(requests, GPU)
    if gpus != int(gpus) or gpus > 64:
        raise BadRequest(f"{GPU} must be a whole number of GPUs up to 64, not {gpus}", name)
    milli = MILLI if gpus else 0
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    cores = _effective(requests, GPU_CORES)
    if gpus and isinstance(annotations, Mapping) and GPU_MILLI in annotations:
        milli = int(quantity(annotations[GPU_MILLI], f"{name}: {GPU_MILLI}"))
    elif gpus and cores:
        milli = int(cores * 10)
    try:
        return PodRequest(
            name,
            int(cpu),
            int(memory),
            int(gpus),
            min(milli, MILLI) if gpus else 0,
            _models(spec, name),
            mig_profile=_mig_profile(requests, name),
        )
    except EngineError as e:
        raise BadRequest(e.what, name) from None


@dataclass(frozen=True)
class ObservedPod:
    """A pod the host cluster reports bound to a node (from a list or a watch event)."""

    request: PodRequest
    node: str
    gpus: tuple[int, ...] = ()  # GPU indices when the device plugin's annotation names them


class Extender:
    """The engine of one host cluster behind the extender verbs, with assumed and observed placements.

    Tenancy comes from the host namespaces (:meth:`set_tenancy`): a pod in a tenant's namespace is booked,
    filtered and scored as that tenant's, under the fleet's sharing rules, and an isolated tenant's pods
    share no node with another tenant's (:meth:`_isolation`). MIG capacity comes from what the nodes
    advertise (:meth:`set_mig_allocatable`). Without either, every pod is a pod of no tenant.

    Thread-safe: one lock around the engine (kube-scheduler asks one pod at a time; the watch feeds between).
    """

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        policy: str | Policy = "default",
        workload: Sequence[PodRequest] = (),
        *,
        assume_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = Engine(nodes, policy, workload)
        self.fleet = self.engine.fleet
        self.assume_seconds = assume_seconds
        self.clock = clock
        self.assumed: dict[str, float] = {}  # pod -> when the assumption lapses
        self.lock = threading.Lock()
        self.namespaces: dict[str, tuple[str, Tier]] = {}  # host namespace -> (tenant slug, trust tier)
        self.mig_allocatable: dict[str, np.ndarray] = {}  # MIG profile -> instances per node
        self._mig_used: dict[str, np.ndarray] = {}  # MIG profile -> instances booked per node
        self._holds: dict[str, tuple[int, int | None, str]] = {}  # pod -> (node, tenant id, MIG profile)
        self._tiers: list[Tier] = []  # per fleet tenant id: the tenant's own tier
        self._isolated = np.zeros(0, dtype=bool)  # per fleet tenant id
        self._tenant_pods = np.zeros((len(self.fleet), 0), dtype=np.int64)  # [node, tenant id]: pods booked
        self._last_names: list[str] = []
        self._last_index = np.zeros(0, dtype=np.int64)

    # --- the verbs ----------------------------------------------------------------------------

    def filter(self, args: Any) -> dict[str, Any]:
        """ExtenderArgs -> ExtenderFilterResult."""
        pod, names = _args(args)
        with self.lock:
            self._forget(pod.name)
            fits, failed, unresolvable = self._filter(*self._tenant(pod), names)
        return {
            "Nodes": None,
            "NodeNames": fits,
            "FailedNodes": failed,
            "FailedAndUnresolvableNodes": unresolvable,
            "Error": "",
        }

    def prioritize(self, args: Any) -> list[dict[str, Any]]:
        """ExtenderArgs -> HostPriorityList; the engine's choice is assumed (booked) at once."""
        pod, names = _args(args)
        with self.lock:
            self._forget(pod.name)
            scores = self._prioritize(*self._tenant(pod), self._index_of(names))
        return [{"Host": n, "Score": s} for n, s in zip(names, scores, strict=True)]

    # --- what the cluster reports -------------------------------------------------------------

    def observe(self, pods: Iterable[ObservedPod], *, complete: bool) -> None:
        """Pods bound to nodes; with ``complete`` (a full list) the others not assumed are dropped."""
        with self.lock:
            seen = set()
            for p in pods:
                seen.add(p.request.name)
                self._book(p)
            if complete:
                now = self.clock()
                for name in [n for n in self._holds if n not in seen and self.assumed.get(n, 0) <= now]:
                    self._release(name)
                    self.assumed.pop(name, None)

    def set_tenancy(self, namespaces: Mapping[str, tuple[str, Tier]]) -> None:
        """The tenants' host namespaces: namespace -> (tenant slug, trust tier); pods elsewhere have none.

        A booked pod keeps the tenant it was booked as until the cluster reports it again (a complete list
        rebooks every pod as its namespace's tenant of now).
        """
        with self.lock:
            self.namespaces = {ns: (slug, Tier(tier)) for ns, (slug, tier) in namespaces.items()}

    def set_mig_allocatable(self, per_node: Mapping[str, Mapping[str, int]]) -> None:
        """MIG instances each node advertises, per profile (its allocatable ``nvidia.com/mig-<profile>``)."""
        table: dict[str, np.ndarray] = {}
        for node, profiles in per_node.items():
            i = self.fleet.index.get(node)
            for profile, count in profiles.items() if i is not None else ():
                table.setdefault(profile, np.zeros(len(self.fleet), dtype=np.int64))[i] = count
        with self.lock:
            self.mig_allocatable = table

    def learn(self, workload: Sequence[PodRequest]) -> None:
        """A new typical-pod sample for the policy (its caches start again)."""
        with self.lock:
            self.engine.policy.prepare(self.fleet, workload)

    def gone(self, name: str) -> None:
        """A pod was deleted (or finished): give back what it held."""
        with self.lock:
            self.assumed.pop(name, None)
            if name in self._holds:
                self._release(name)

    # --- inside the lock ----------------------------------------------------------------------

    def _tenant(self, pod: PodRequest) -> tuple[PodRequest, int | None]:
        """The pod as its host namespace's tenant's, and that tenant's fleet id (None: a pod of no tenant)."""
        owner = self.namespaces.get(pod.name.partition("/")[0])
        if owner is None:
            return pod, None
        slug, tier = owner
        # An isolated tenant has no node pool of its own here: in the fleet it shares GPUs as a standard
        # tenant does (with nobody), and _isolation keeps other tenants off its nodes. The tier is part of
        # the fleet's tenant name, so a namespace relabelled to another tier makes a new fleet tenant
        # instead of clashing with the pods booked under the old one.
        name, fleet_tier = f"{slug} ({tier})", Tier.STANDARD if tier == Tier.ISOLATED else tier
        tid = self.fleet.tenant(name, fleet_tier)
        if tid == len(self._tiers):
            self._tiers.append(tier)
            self._isolated = np.append(self._isolated, tier == Tier.ISOLATED)
            self._tenant_pods = np.pad(self._tenant_pods, ((0, 0), (0, 1)))
        return replace(pod, tenant=name, tier=fleet_tier), tid

    def _allocate(self, pod: PodRequest, i: int, gpus: Sequence[int], tid: int | None) -> None:
        self.fleet.allocate(pod, i, gpus, tid)
        self._holds[pod.name] = (i, tid, pod.mig_profile)
        if tid is not None:
            self._tenant_pods[i, tid] += 1
        if pod.mig_profile:
            self._mig_used.setdefault(pod.mig_profile, np.zeros(len(self.fleet), dtype=np.int64))[i] += 1

    def _release(self, name: str) -> None:
        self.fleet.release(name)
        i, tid, profile = self._holds.pop(name)
        if tid is not None:
            self._tenant_pods[i, tid] -= 1
        if profile:
            self._mig_used[profile][i] -= 1

    def _forget(self, name: str) -> None:
        """A pod asked about again was not bound where it was assumed: drop the assumption."""
        if name in self.assumed:
            del self.assumed[name]
            self._release(name)
        self._expire()

    def _expire(self) -> None:
        # Assumptions are added with the same lifetime on a monotonic clock, so the dict's insertion order is
        # their expiry order: stop at the first one still live (a call costs O(expired), not O(assumed)).
        now = self.clock()
        expired = []
        for name, until in self.assumed.items():
            if until > now:
                break
            expired.append(name)
        for name in expired:
            del self.assumed[name]
            self._release(name)

    def _book(self, p: ObservedPod) -> None:
        pod, tid = self._tenant(p.request)
        self.assumed.pop(pod.name, None)
        i = self.fleet.index.get(p.node)
        held = self._holds.get(pod.name)
        if held is not None:
            if held[0] == i and held[1] == tid:
                return
            self._release(pod.name)  # bound elsewhere, or its namespace changed tenant
        if i is None:
            return
        width = int(self.fleet.gpu_count[i])
        gpus = tuple(g for g in p.gpus if 0 <= g < width)
        if len(gpus) != pod.num_gpu:  # not named: the GPUs with the most room, lowest index first
            order = np.argsort(-self.fleet.gpu_free[i, :width], kind="stable")
            gpus = tuple(int(g) for g in order[: pod.num_gpu])
        self._allocate(pod, i, gpus, tid)

    def _index_of(self, names: Sequence[str]) -> np.ndarray:
        """Fleet index per name (-1: a node the engine does not know).

        kube-scheduler sends the same node list call after call: comparing lists runs in C, mapping them
        name by name does not, so the last mapping is kept.
        """
        if names != self._last_names:
            index = self.fleet.index
            self._last_names = list(names)
            self._last_index = np.array([index.get(n, -1) for n in names], dtype=np.int64)
        return self._last_index

    def _isolation(self, tid: int | None) -> np.ndarray | None:
        """Nodes the isolated tier leaves open to this tenant's pods (None: every node).

        An isolated tenant's pods go only to nodes that run no other tenant's pods, and other tenants' pods
        stay off nodes that run an isolated tenant's. Pods of no tenant (system pods, namespaces gpucloud does
        not manage) neither count nor are kept off.
        """
        if tid is None or not self._isolated.any():
            return None
        counts = self._tenant_pods
        allowed: np.ndarray
        if self._isolated[tid]:
            allowed = counts.sum(axis=1) == counts[:, tid]
        else:
            allowed = counts[:, self._isolated].sum(axis=1) == 0
        return allowed

    def _mig_free(self, profile: str) -> np.ndarray:
        """Instances of a MIG profile per node: advertised less booked (negative when overbooked)."""
        none = np.zeros(len(self.fleet), dtype=np.int64)
        free: np.ndarray = self.mig_allocatable.get(profile, none) - self._mig_used.get(profile, none)
        return free

    def _candidates(self, pod: PodRequest, tid: int | None) -> tuple[np.ndarray, np.ndarray] | None:
        """The fleet's candidates, less the nodes the extender's own rules (isolation, MIG) refuse."""
        try:
            cand, gpu_ok = self.fleet.candidates(pod, tid)
        except UnknownGpuModel:
            return None
        allowed = self._isolation(tid)
        if pod.mig_profile:
            free = self._mig_free(pod.mig_profile) > 0
            allowed = free if allowed is None else allowed & free
        if allowed is None:
            return cand, gpu_ok
        keep = allowed[cand]
        return cand[keep], gpu_ok[keep]

    def _filter(
        self, pod: PodRequest, tid: int | None, names: Sequence[str]
    ) -> tuple[list[str], dict[str, str], dict[str, str]]:
        idx = self._index_of(names)
        found = self._candidates(pod, tid)
        if found is None:  # no node of the fleet has a model the pod accepts
            models = "|".join(sorted(pod.gpu_models))
            pairs = list(zip(names, idx.tolist(), strict=True))
            nowhere = {n: f"no GPU node here has model {models}" for n, i in pairs if i >= 0}
            return [n for n, i in pairs if i < 0], {}, nowhere
        fit = np.zeros(len(self.fleet), dtype=bool)
        fit[found[0]] = True
        ok = (idx < 0) | fit[np.maximum(idx, 0)]
        passed = [n for n, good in zip(names, ok.tolist(), strict=True) if good]
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        failing = np.flatnonzero(~ok)
        if len(failing):
            codes = self._reasons(pod, tid)[idx[failing]].tolist()
            texts = self._texts(pod, tid)
            for pos, code in zip(failing.tolist(), codes, strict=True):
                (unresolvable if code < HOPELESS else failed)[names[pos]] = texts[code]
        return passed, failed, unresolvable

    def _reasons(self, pod: PodRequest, tid: int | None) -> np.ndarray:
        """Per fleet node, why it cannot take the pod now (an index into :meth:`_texts`), all at once."""
        f = self.fleet
        nowhere = np.zeros(len(f), dtype=bool)
        too_small = (f.cpu_cap < pod.cpu_milli) | (f.mem_cap < pod.memory_mib) | (f.gpu_count < pod.num_gpu)
        isolation = self._isolation(tid)
        conditions = [
            ~f.node_healthy,
            ~f.model_mask(pod),
            too_small,
            nowhere if isolation is None else ~isolation,
            f.cpu_free < pod.cpu_milli,
            f.mem_free < pod.memory_mib,
            self._mig_free(pod.mig_profile) < 1 if pod.mig_profile else nowhere,
            self._held_by_tenants(pod, tid) if self._tenant_pods.size else nowhere,
        ]
        reasons: np.ndarray = np.select(conditions, list(range(len(conditions))), len(conditions))
        return reasons

    def _held_by_tenants(self, pod: PodRequest, tid: int | None) -> np.ndarray:
        """Nodes with enough GPUs that have room for the pod, but not enough the sharing rules let it use."""
        f = self.fleet
        if not pod.num_gpu:
            return np.zeros(len(f), dtype=bool)
        room = ((f.gpu_free >= pod.gpu_milli) & f.gpu_healthy).sum(axis=1) >= pod.num_gpu
        held: np.ndarray = room & (f.usable_gpus(pod, tid).sum(axis=1) < pod.num_gpu)
        return held

    def _texts(self, pod: PodRequest, tid: int | None) -> list[str]:
        models = "|".join(sorted(pod.gpu_models))
        tier = None if tid is None else self._tiers[tid]
        if tier is None:
            shared = "GPU shared with a tenant (a pod of no tenant takes only GPUs no tenant holds)"
        elif tier == Tier.TRUSTED:
            shared = "GPU shared with another tenant (trusted tier: shares only with trusted tenants)"
        else:
            shared = f"GPU shared with another tenant ({tier} tier: never shares a GPU)"
        return [
            "node is quarantined or cordoned by gpucloud",
            f"GPU model is not one the pod accepts ({models})",
            "node is too small for the pod even when empty",
            "node runs pods of another tenant (isolated tier)"
            if tier == Tier.ISOLATED
            else "node runs pods of an isolated tenant",
            f"not enough free CPU for {pod.cpu_milli}m",
            f"not enough free memory for {pod.memory_mib} MiB",
            f"no free {MIG}{pod.mig_profile} instance",
            shared,
            f"fewer than {pod.num_gpu} healthy GPU(s) with {pod.gpu_milli} milli free",
        ]

    def _prioritize(self, pod: PodRequest, tid: int | None, idx: np.ndarray) -> list[int]:
        """Score per asked node (aligned with ``idx``); books the chosen one as assumed."""
        zeros = [0] * len(idx)
        found = self._candidates(pod, tid)
        if found is None:
            return zeros
        cand, gpu_ok = found
        keep = np.isin(cand, idx[idx >= 0])
        cand, gpu_ok = cand[keep], gpu_ok[keep]
        if not len(cand):
            return zeros
        if pod.mig_profile:
            position, gpus, raw = self._pack_mig(pod, cand)
        else:
            policy, t = self.engine.policy, -1 if tid is None else tid
            choice = policy.choose(self.fleet, pod, cand, gpu_ok, t)
            position, gpus = choice.position, choice.gpus
            raw = policy.scores(self.fleet, pod, cand, gpu_ok, t)
        full = np.zeros(len(self.fleet), dtype=np.int64)
        full[cand] = np.clip(raw * (MAX_PRIORITY - 1) // max(int(raw.max()), 1), 0, MAX_PRIORITY - 1)
        chosen = int(cand[position])
        full[chosen] = MAX_PRIORITY
        self._allocate(pod, chosen, gpus, tid)
        self.assumed[pod.name] = self.clock() + self.assume_seconds
        scores: list[int] = np.where(idx >= 0, full[np.maximum(idx, 0)], 0).tolist()
        return scores

    def _pack_mig(self, pod: PodRequest, cand: np.ndarray) -> tuple[int, tuple[int, ...], np.ndarray]:
        """A MIG pod is packed, as the engine packs MIG pods: the candidate with the fewest free instances
        of its profile is chosen (first in node order), the others score higher the fewer they have free.
        The policy's fragmentation score does not rank MIG instances."""
        free = self._mig_free(pod.mig_profile)[cand]
        return int(np.argmin(free)), (), free.max() - free


def _args(args: Any) -> tuple[PodRequest, list[str]]:
    if not isinstance(args, Mapping):
        raise BadRequest("the body must be ExtenderArgs: {Pod, NodeNames}", "body")
    names = args.get("NodeNames")
    if names is None:
        raise BadRequest("NodeNames is missing: configure the extender with nodeCacheCapable: true", "body")
    if not isinstance(names, list) or not set(map(type, names)) <= {str}:
        raise BadRequest("NodeNames must be a list of node names", "body")
    return pod_request(args.get("Pod")), names


def handle(extender: Extender, verb: str, body: bytes) -> tuple[int, Any]:
    """One extender call: (HTTP status, JSON-able answer). 400 for bad input, 404 for an unknown verb."""
    if verb not in VERBS:
        return 404, {"Error": f"unknown verb {verb!r}; this extender serves {', '.join(VERBS)}"}
    if len(body) > MAX_BODY:
        return 413, {"Error": f"body larger than {MAX_BODY} bytes"}
    try:
        args = json.loads(body)
        return 200, extender.filter(args) if verb == "filter" else extender.prioritize(args)
    except (ValueError, RecursionError) as e:  # JSONDecodeError and BadRequest are ValueErrors
        message = str(e) if isinstance(e, BadRequest) else f"the body is not JSON: {e}"
        return 400, {"Error": message}
