"""A v1.Pod as the placement engine reads it: what it asks (`pod_request`) and where it runs (`ObservedPod`).

Pods are read as kube-scheduler sends them: CPU and memory requests (``max(sum of containers, largest init
container)``), whole GPUs from ``nvidia.com/gpu``, a fraction of one GPU from the ``gpucloud.io/gpu-milli``
annotation or HAMi's ``nvidia.com/gpucores`` (percent), and the GPU models a pod accepts from
``nvidia.com/gpu.product`` in its nodeSelector or required node affinity (``In``), and one MIG instance
from ``nvidia.com/mig-<profile>: 1``. Bad input raises :class:`BadRequest` (the server answers 400);
nothing here raises anything else for any JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from placement.engine.errors import EngineError
from placement.engine.fleet import MILLI, PodRequest

GPU = "nvidia.com/gpu"
GPU_CORES = "nvidia.com/gpucores"  # HAMi: percent of one GPU's compute
GPU_MILLI = "gpucloud.io/gpu-milli"  # annotation: thousandths of one GPU
MIG = "nvidia.com/mig-"  # + profile: one MIG instance (the GPU Operator's mixed strategy)
MODEL_LABEL = "nvidia.com/gpu.product"
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


def extender_args(args: Any) -> tuple[PodRequest, list[str]]:
    """ExtenderArgs ``{Pod, NodeNames}``: the pod's request and the candidate node names."""
    if not isinstance(args, Mapping):
        raise BadRequest("the body must be ExtenderArgs: {Pod, NodeNames}", "body")
    names = args.get("NodeNames")
    if names is None:
        raise BadRequest("NodeNames is missing: configure the extender with nodeCacheCapable: true", "body")
    if not isinstance(names, list) or not set(map(type, names)) <= {str}:
        raise BadRequest("NodeNames must be a list of node names", "body")
    return pod_request(args.get("Pod")), names


@dataclass(frozen=True)
class ObservedPod:
    """A pod the host cluster reports bound to a node (from a list or a watch event)."""

    request: PodRequest
    node: str
    gpus: tuple[int, ...] = ()  # GPU indices when the device plugin's annotation names them
