"""The kube-scheduler HTTP extender protocol over the placement engine: pure, no Django, no HTTP server.

kube-scheduler (``extenders:`` in its ``KubeSchedulerConfiguration``, ``nodeCacheCapable: true``) POSTs
``ExtenderArgs`` ``{"Pod": <v1.Pod>, "NodeNames": [...]}`` to ``…/filter`` and ``…/prioritize``:

- ``filter`` answers ``ExtenderFilterResult``: the nodes where the engine's rules let the pod land now (CPU,
  memory, GPUs with enough free milli, GPU model, health), the others in ``FailedNodes`` with the reason, or
  in ``FailedAndUnresolvableNodes`` when preempting pods there could not help (wrong GPU model, quarantined,
  too small even when empty). Nodes the engine does not know (no GPU) pass untouched: not gpucloud's business.
- ``prioritize`` answers a ``HostPriorityList``: the node the engine's policy chooses (``Policy.choose``, the
  code the benchmarks measure) scores ``MaxExtenderPriority`` (10), every other candidate its policy score
  scaled to 0-9. The choice is *assumed* at once (booked in the engine, as kube-scheduler's own cache assumes
  a pod before binding), so the next pod is placed against it without waiting for the cluster to report the
  binding; the host cluster's list and watch then confirm it (:meth:`Extender.observe`), move it to where it
  really went, or drop it once ``assume_seconds`` pass unconfirmed.

Pods are read as kube-scheduler sends them: CPU and memory requests (``max(sum of containers, largest init
container)``), whole GPUs from ``nvidia.com/gpu``, a fraction of one GPU from the ``gpucloud.io/gpu-milli``
annotation or HAMi's ``nvidia.com/gpucores`` (percent), and the GPU models a pod accepts from
``nvidia.com/gpu.product`` in its nodeSelector or required node affinity (``In``). Bad input raises
:class:`BadRequest` (the server answers 400); nothing here raises anything else for any JSON.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np

from scheduling.engine.errors import EngineError, UnknownGpuModel
from scheduling.engine.fleet import MILLI, NodeSpec, PodRequest
from scheduling.engine.placer import Engine
from scheduling.engine.policies import Policy

MAX_PRIORITY = 10  # kube-scheduler's MaxExtenderPriority
GPU = "nvidia.com/gpu"
GPU_CORES = "nvidia.com/gpucores"  # HAMi: percent of one GPU's compute
GPU_MILLI = "gpucloud.io/gpu-milli"  # annotation: thousandths of one GPU
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
    except (InvalidOperation, ValueError):
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


def _effective(spec: Mapping[str, Any], name: str, where: str) -> Decimal:
    """The scheduler's view of a request: max(sum over containers, largest init container)."""
    main = sum((c.get(name, Decimal(0)) for c in _containers(spec, "containers", where)), Decimal(0))
    init = [c.get(name, Decimal(0)) for c in _containers(spec, "initContainers", where)]
    return max([main, *init])


def _models(spec: Mapping[str, Any]) -> frozenset[str]:
    """GPU models the pod accepts: nodeSelector, else the union over required node-affinity terms (``In``)."""
    selector = spec.get("nodeSelector") or {}
    if isinstance(selector, Mapping) and isinstance(selector.get(MODEL_LABEL), str):
        return frozenset([selector[MODEL_LABEL]])
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}) if isinstance(spec, Mapping) else {}
    required = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}) if affinity else {}
    models: set[str] = set()
    for term in required.get("nodeSelectorTerms") or []:
        for expr in (term or {}).get("matchExpressions") or []:
            if (expr or {}).get("key") == MODEL_LABEL and expr.get("operator") == "In":
                models.update(str(v) for v in expr.get("values") or [])
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
    cpu = _effective(spec, "cpu", name) * 1000
    memory = _effective(spec, "memory", name) / 2**20
    gpus = _effective(spec, GPU, name)
    if gpus != int(gpus) or gpus > 64:
        raise BadRequest(f"{GPU} must be a whole number of GPUs up to 64, not {gpus}", name)
    milli = MILLI if gpus else 0
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    cores = _effective(spec, GPU_CORES, name)
    if gpus and isinstance(annotations, Mapping) and GPU_MILLI in annotations:
        milli = int(quantity(annotations[GPU_MILLI], f"{name}: {GPU_MILLI}"))
    elif gpus and cores:
        milli = int(cores * 10)
    try:
        return PodRequest(
            name, int(cpu), int(memory), int(gpus), min(milli, MILLI) if gpus else 0, _models(spec)
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
        self._last_names: list[str] = []
        self._last_index = np.zeros(0, dtype=np.int64)

    # --- the verbs ----------------------------------------------------------------------------

    def filter(self, args: Any) -> dict[str, Any]:
        """ExtenderArgs -> ExtenderFilterResult."""
        pod, names = _args(args)
        with self.lock:
            self._forget(pod.name)
            fits, failed, unresolvable = self._filter(pod, names)
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
            scores = self._prioritize(pod, self._index_of(names))
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
                for name in list(self.fleet.placements()):
                    if name not in seen and self.assumed.get(name, 0) <= now:
                        self.fleet.release(name)
                        self.assumed.pop(name, None)

    def learn(self, workload: Sequence[PodRequest]) -> None:
        """A new typical-pod sample for the policy (its caches start again)."""
        with self.lock:
            self.engine.policy.prepare(self.fleet, workload)

    def gone(self, name: str) -> None:
        """A pod was deleted (or finished): give back what it held."""
        with self.lock:
            self.assumed.pop(name, None)
            if name in self.fleet.placements():
                self.fleet.release(name)

    # --- inside the lock ----------------------------------------------------------------------

    def _forget(self, name: str) -> None:
        """A pod asked about again was not bound where it was assumed: drop the assumption."""
        if name in self.assumed:
            del self.assumed[name]
            self.fleet.release(name)
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
            self.fleet.release(name)

    def _book(self, p: ObservedPod) -> None:
        name = p.request.name
        self.assumed.pop(name, None)
        i = self.fleet.index.get(p.node)
        current = self.fleet.placements().get(name)
        if current is not None:
            if current.node == p.node:
                return
            self.fleet.release(name)
        if i is None:
            return
        width = int(self.fleet.gpu_count[i])
        gpus = tuple(g for g in p.gpus if 0 <= g < width)
        if len(gpus) != p.request.num_gpu:  # not named: the GPUs with the most room, lowest index first
            order = np.argsort(-self.fleet.gpu_free[i, :width], kind="stable")
            gpus = tuple(int(g) for g in order[: p.request.num_gpu])
        self.fleet.allocate(p.request, i, gpus)

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

    def _candidates(self, pod: PodRequest) -> tuple[np.ndarray, np.ndarray] | None:
        try:
            return self.fleet.candidates(pod, None)
        except UnknownGpuModel:
            return None

    def _filter(self, pod: PodRequest, names: Sequence[str]) -> tuple[list[str], dict, dict]:
        idx = self._index_of(names)
        found = self._candidates(pod)
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
            codes = self._reasons(pod)[idx[failing]].tolist()
            texts = self._texts(pod)
            for pos, code in zip(failing.tolist(), codes, strict=True):
                (unresolvable if code < HOPELESS else failed)[names[pos]] = texts[code]
        return passed, failed, unresolvable

    def _reasons(self, pod: PodRequest) -> np.ndarray:
        """Per fleet node, why it cannot take the pod now (an index into :meth:`_texts`), all at once."""
        f = self.fleet
        too_small = (f.cpu_cap < pod.cpu_milli) | (f.mem_cap < pod.memory_mib) | (f.gpu_count < pod.num_gpu)
        conditions = [
            ~f.node_healthy,
            ~f.model_mask(pod),
            too_small,
            f.cpu_free < pod.cpu_milli,
            f.mem_free < pod.memory_mib,
        ]
        return np.select(conditions, [0, 1, 2, 3, 4], 5)

    @staticmethod
    def _texts(pod: PodRequest) -> list[str]:
        models = "|".join(sorted(pod.gpu_models))
        return [
            "node is quarantined or cordoned by gpucloud",
            f"GPU model is not one the pod accepts ({models})",
            "node is too small for the pod even when empty",
            f"not enough free CPU for {pod.cpu_milli}m",
            f"not enough free memory for {pod.memory_mib} MiB",
            f"fewer than {pod.num_gpu} healthy GPU(s) with {pod.gpu_milli} milli free",
        ]

    def _prioritize(self, pod: PodRequest, idx: np.ndarray) -> list[int]:
        """Score per asked node (aligned with ``idx``); books the chosen one as assumed."""
        zeros = [0] * len(idx)
        found = self._candidates(pod)
        if found is None:
            return zeros
        cand, gpu_ok = found
        keep = np.isin(cand, idx[idx >= 0])
        cand, gpu_ok = cand[keep], gpu_ok[keep]
        if not len(cand):
            return zeros
        policy = self.engine.policy
        choice = policy.choose(self.fleet, pod, cand, gpu_ok)
        raw = policy.scores(self.fleet, pod, cand, gpu_ok)
        full = np.zeros(len(self.fleet), dtype=np.int64)
        full[cand] = np.clip(raw * (MAX_PRIORITY - 1) // max(int(raw.max()), 1), 0, MAX_PRIORITY - 1)
        chosen = int(cand[choice.position])
        full[chosen] = MAX_PRIORITY
        self.fleet.allocate(pod, chosen, choice.gpus)
        self.assumed[pod.name] = self.clock() + self.assume_seconds
        return np.where(idx >= 0, full[np.maximum(idx, 0)], 0).tolist()


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
