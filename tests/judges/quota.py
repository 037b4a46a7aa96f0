"""The ResourceQuota layer: what the API server's quota admission would refuse of a pod, from the
ResourceQuotas gpucloud rendered for the pod's namespace and the pods already running there.

The arithmetic of kube-apiserver's pod evaluator (pkg/quota/v1/evaluator/core/pods.go) for what gpucloud's
quotas name: a pod's request of a resource is the larger of its containers' (and sidecars') sum and its
largest init container, plus the pod overhead; an extended resource given only as a limit is requested at
that limit. DRA device counts (`<class>.deviceclass.resource.k8s.io/devices`) are charged for the claims
the pod's `resourceClaimTemplateName`s would create, from the namespace's rendered templates. Usage is the
same sum over `world.running` in the namespace (pods not yet finished). One message per exceeded quota, as
the API server words it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from clusters.render.dra import DEVICE_COUNT
from gpucloud.kube.meta import Manifest
from tests.judges.world import World

FINISHED = ("Succeeded", "Failed")
COMPUTE = ("cpu", "memory", "ephemeral-storage")


Amounts = dict[str, Decimal]


def _add(total: Amounts, more: Amounts) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, Decimal(0)) + amount


def _container_amounts(container: dict[str, Any], prefix: str) -> Amounts:
    resources = container.get("resources") or {}
    limits = {name: parse_quantity(v) for name, v in (resources.get("limits") or {}).items()}
    amounts = {name: parse_quantity(v) for name, v in (resources.get(prefix) or {}).items()}
    if prefix == "requests":  # an extended resource given only as a limit is requested at that limit
        amounts = {name: v for name, v in limits.items() if name not in COMPUTE} | amounts
    return amounts


def _pod_amounts(pod: Manifest, prefix: str) -> Amounts:
    spec = pod.get("spec") or {}
    total: Amounts = {}
    for container in spec.get("containers") or []:
        _add(total, _container_amounts(container, prefix))
    for init in spec.get("initContainers") or []:
        if init.get("restartPolicy") == "Always":  # a sidecar runs beside the containers
            _add(total, _container_amounts(init, prefix))
    for init in spec.get("initContainers") or []:
        if init.get("restartPolicy") != "Always":
            for name, amount in _container_amounts(init, prefix).items():
                total[name] = max(total.get(name, Decimal(0)), amount)
    _add(total, {name: parse_quantity(v) for name, v in (spec.get("overhead") or {}).items()})
    return total


def _claimed_devices(pod: Manifest, world: World) -> Counter[str]:
    """Devices per quota key the claims made from the pod's claim templates would hold."""
    namespace = pod["metadata"]["namespace"]
    templates = {t["metadata"]["name"]: t for t in world.objects("ResourceClaimTemplate", namespace)}
    devices: Counter[str] = Counter()
    for claim in (pod.get("spec") or {}).get("resourceClaims") or []:
        template = templates.get(claim.get("resourceClaimTemplateName", ""))
        requests = ((template or {}).get("spec") or {}).get("spec", {}).get("devices", {}).get("requests", [])
        for request in requests:
            exactly = request.get("exactly") or {}
            devices[f"{exactly.get('deviceClassName', '')}{DEVICE_COUNT}"] += int(exactly.get("count", 1))
    return devices


def usage(pod: Manifest, world: World) -> dict[str, Decimal]:
    """What the pod counts against every key a ResourceQuota may name."""
    requests, limits = _pod_amounts(pod, "requests"), _pod_amounts(pod, "limits")
    used: dict[str, Decimal] = {"pods": Decimal(1), "count/pods": Decimal(1)}
    used |= {f"requests.{name}": amount for name, amount in requests.items()}
    used |= {name: amount for name, amount in requests.items() if name in COMPUTE}
    used |= {f"limits.{name}": amount for name, amount in limits.items()}
    used |= {name: Decimal(count) for name, count in _claimed_devices(pod, world).items()}
    return used


def _sum(pods: Iterable[Manifest], world: World) -> Amounts:
    total: Amounts = {}
    for pod in pods:
        _add(total, usage(pod, world))
    return total


def _counts_in(pod: Manifest, namespace: str) -> bool:
    """A pod counts against its namespace's quotas until it has finished."""
    phase = (pod.get("status") or {}).get("phase")
    return bool(pod["metadata"].get("namespace") == namespace and phase not in FINISHED)


def _show(amount: Decimal) -> str:
    return str(int(amount)) if amount == amount.to_integral_value() else str(amount)


def _pairs(keys: list[str], values: dict[str, Decimal]) -> str:
    return ",".join(f"{key}={_show(values.get(key, Decimal(0)))}" for key in keys)


def judge(pod: Manifest, world: World) -> list[str]:
    """The messages with which the namespace's ResourceQuotas refuse `pod`; empty when they admit it."""
    namespace = pod["metadata"]["namespace"]
    requested = usage(pod, world)
    used = _sum((p for p in world.running if _counts_in(p, namespace)), world)
    messages = []
    for quota in world.objects("ResourceQuota", namespace):
        if quota["spec"].get("scopes") or quota["spec"].get("scopeSelector"):
            raise NotImplementedError("gpucloud renders no scoped ResourceQuota")
        hard = {key: parse_quantity(value) for key, value in quota["spec"]["hard"].items()}
        over = sorted(
            key
            for key, limit in hard.items()
            if requested.get(key) and used.get(key, Decimal(0)) + requested[key] > limit
        )
        if over:
            messages.append(
                f"exceeded quota: {quota['metadata']['name']}, requested: {_pairs(over, requested)}, "
                f"used: {_pairs(over, used)}, limited: {_pairs(over, hard)}"
            )
    return messages
