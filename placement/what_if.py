"""Would these quotas, or this gang, fit on the fleet now, and where? Answered by the placement engine on a
scratch copy of the fleet model (running pods held, pools dedicated, MIG layouts as planned); nothing is
written. See docs/api.md, `POST /api/v1/fleet/what-if/`.

Answers name nodes and counts only, never which tenants hold what: anyone signed in may ask, but only about
their own tenants (another tenant is "not found") or about a hypothetical new tenant of a trust tier.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from fleet.models import GpuClass, HostCluster
from gpucloud.errors import Conflict, NotFound, ValidationFailed
from placement.engine import LEVELS, EngineError, GangRequest, Placement, PodRequest, Tier, UnknownGpuModel
from placement.service import CPU_PER_GPU, MEMORY_PER_GPU, MILLI, FleetModel, gpus_for, pod_request
from tenants import tiers
from tenants.capacity import pick_host_cluster
from tenants.models import Tenant

MAX_GANG_PODS = 1024
HYPOTHETICAL = "what-if"  # engine name of a new tenant nobody has created yet


@dataclass(frozen=True)
class QuotaAsk:
    """One line of a quota what-if: `guaranteed` units of a class for a tenant, or for a new one of a tier."""

    gpu_class: str
    guaranteed: int
    tenant: str = ""
    trust_tier: str = ""


@dataclass(frozen=True)
class GangAsk:
    """A gang what-if: `pods` pods of `gpus_per_pod` GPUs (or one unit of a share class), in one domain."""

    pods: int
    gpus_per_pod: int = 1
    gpu_class: str = ""
    level: str = "rack"
    required: bool = False
    tenant: str = ""
    trust_tier: str = ""


@dataclass(frozen=True)
class Who:
    """Whom the question is for, as the engine names it."""

    slug: str
    tier: str
    tenant: Tenant | None


def _who(tenants: QuerySet[Tenant], slug: str, tier: str, field: str) -> Who:
    if not slug:
        tier = tier or Tenant.TrustTier.STANDARD
        return Who(f"{HYPOTHETICAL}-{tier}", tier, None)
    tenant = tenants.select_related("cluster__host_cluster").filter(slug=slug).first()
    if tenant is None or tenant.state == Tenant.State.DELETED:
        raise NotFound(f"no tenant {slug!r}, or it is not visible to you", errors={field: ["not found"]})
    if tier and tier != tenant.trust_tier:
        raise ValidationFailed.on(
            field.replace("tenant", "trust_tier"),
            f"tenant {slug} is {tenant.trust_tier}, not {tier}; leave trust_tier out when naming a tenant",
        )
    return Who(tenant.slug, tenant.trust_tier, tenant)


def _subject(who: Who) -> str:
    return f"tenant {who.slug} ({who.tier})" if who.tenant else ""


def _gpu_class(name: str, field: str) -> GpuClass:
    gpu_class = GpuClass.objects.select_related("gpu_model").filter(name=name).first()
    if gpu_class is None:
        raise ValidationFailed.on(
            field, f"unknown GPU class {name!r}; GET /api/v1/gpu-classes/ lists the known ones"
        )
    return gpu_class


def _host_cluster(name: str, whos: Sequence[Who]) -> HostCluster:
    """The host cluster asked about: the named tenants', the one named, or the one a new tenant would be
    placed on (`tenants.capacity.pick_host_cluster`, as tenant creation picks it)."""
    clusters = {w.tenant.cluster.host_cluster for w in whos if w.tenant is not None}
    if len(clusters) > 1:
        raise ValidationFailed.on(
            "quotas", "the tenants named live on different host clusters; ask one at a time"
        )
    if name:
        named = HostCluster.objects.filter(name=name).first()
        if named is None or (clusters and named not in clusters):
            raise ValidationFailed.on("host_cluster", f"no host cluster {name!r} for these tenants")
        if named.retired:
            raise ValidationFailed.on(
                "host_cluster", f"host cluster {name} is retired: it takes no work; ask about one in service"
            )
        return named
    if clusters:
        return clusters.pop()
    try:
        picked = pick_host_cluster()
    except Conflict:
        picked = None
    if picked is None or not picked.nodes.exists():
        raise ValidationFailed.on("host_cluster", "there is no ready host cluster with nodes yet")
    return picked


def _nodes(placements: Sequence[Placement], units: dict[str, int]) -> list[dict[str, Any]]:
    per_node: Counter[str] = Counter()
    for p in placements:
        per_node[p.node] += units[p.pod]
    return [{"node": node, "units": n} for node, n in sorted(per_node.items())]


def quotas(tenants: QuerySet[Tenant], asks: Sequence[QuotaAsk], host_cluster: str = "") -> dict[str, Any]:
    """Would all these guarantees fit physically now, next to what is running? Entries are tried in order,
    each on top of the ones before; entries without a tenant of one tier are one new tenant of that tier."""
    whos = [_who(tenants, a.tenant, a.trust_tier, f"quotas[{k}].tenant") for k, a in enumerate(asks)]
    classes = [_gpu_class(a.gpu_class, f"quotas[{k}].gpu_class") for k, a in enumerate(asks)]
    cluster = _host_cluster(host_cluster, whos)
    model = FleetModel.build(cluster).scratch()
    answers = [
        _quota(model, k, ask, who, gpu_class)
        for k, (ask, who, gpu_class) in enumerate(zip(asks, whos, classes, strict=True))
    ]
    return {
        "kind": "quotas",
        "fits": all(a["fits"] for a in answers),
        "host_cluster": cluster.name,
        "quotas": answers,
    }


def _quota(model: FleetModel, k: int, ask: QuotaAsk, who: Who, gpu_class: GpuClass) -> dict[str, Any]:
    """Place one line's units one pod each on the scratch model; say how many fit and where."""
    tiers.require_allowed(who.tier, gpu_class, field=f"quotas[{k}].gpu_class", who=_subject(who))
    if who.tier == Tenant.TrustTier.ISOLATED:
        model.carve(who.slug, gpu_class.gpu_model.slug, ask.guaranteed)
    placed: list[Placement] = []
    units: dict[str, int] = {}
    got = 0
    try:
        got = _place_units(model, f"q{k}", gpu_class, 1, ask.guaranteed, who, placed, units)
        if got < ask.guaranteed and gpu_class.kind == GpuClass.Kind.MIG:
            # No free instance of the profile left: the rest needs idle GPUs laid out anew, counted whole.
            whole = GpuClass.objects.select_related("gpu_model").get(name=gpu_class.gpu_model.slug)
            rest = ask.guaranteed - got
            gpus = _place_units(model, f"q{k}-gpu", whole, 1, gpus_for(gpu_class, rest), who, placed, units)
            for n in range(gpus):  # each such GPU gives up to a full layout of the profile
                units[f"q{k}-gpu-{n}"] = min(gpu_class.units_per_gpu(), rest)
                got, rest = got + units[f"q{k}-gpu-{n}"], rest - units[f"q{k}-gpu-{n}"]
    except UnknownGpuModel:
        pass  # the class exists but this host cluster has none of its GPUs: nothing fits
    return _quota_answer(ask, who, got, placed, units)


def _place_units(
    model: FleetModel,
    prefix: str,
    gpu_class: GpuClass,
    size: int,
    count: int,
    who: Who,
    placed: list[Placement],
    units: dict[str, int],
) -> int:
    """Place up to `count` pods of `size` units, stopping at the first that does not fit; how many fit."""
    for n in range(count):
        name = f"{prefix}-{n}"
        placement = model.place(pod_request(name, gpu_class, size, who.slug, who.tier))
        if placement is None:
            return n
        placed.append(placement)
        units[name] = size
    return count


def _quota_answer(
    ask: QuotaAsk, who: Who, got: int, placed: list[Placement], units: dict[str, int]
) -> dict[str, Any]:
    return {
        "tenant": who.tenant.slug if who.tenant else None,
        "trust_tier": who.tier,
        "gpu_class": ask.gpu_class,
        "guaranteed": ask.guaranteed,
        "fits": got >= ask.guaranteed,
        "placeable": got,
        "nodes": _nodes(placed, units),
    }


def gang(tenants: QuerySet[Tenant], ask: GangAsk, host_cluster: str = "") -> dict[str, Any]:
    """Would this gang fit now, all pods or none, inside one domain of the topology level? Where?"""
    if ask.level not in LEVELS:
        raise ValidationFailed.on(
            "gang.topology", f"unknown topology level {ask.level!r}; known: {', '.join(LEVELS)}"
        )
    who = _who(tenants, ask.tenant, ask.trust_tier, "gang.tenant")
    gpu_class = _gang_class(ask)
    if who.tier == Tenant.TrustTier.ISOLATED and gpu_class is None:
        raise ValidationFailed.on(
            "gang.gpu_class", "isolated tenants get whole GPUs of one model: name a whole class"
        )
    if gpu_class is not None:
        tiers.require_allowed(who.tier, gpu_class, field="gang.gpu_class", who=_subject(who))
    model = FleetModel.build(_host_cluster(host_cluster, [who])).scratch()
    size = ask.gpus_per_pod if gpu_class is None or gpu_class.kind == GpuClass.Kind.WHOLE else 1
    pods = tuple(_gang_pod(f"g-{n}", gpu_class, size, who) for n in range(ask.pods))
    try:
        placements = model.place_gang(GangRequest("what-if", pods, ask.level, ask.required)) or []
    except EngineError as exc:
        raise ValidationFailed.on("gang", f"this gang can never fit here: {exc.what}") from None
    topology = {"level": ask.level, "mode": "required" if ask.required else "preferred"}
    return {
        "kind": "gang",
        "fits": bool(placements),
        "host_cluster": model.host_cluster.name,
        "topology": topology,
        "domain": _domain(model, placements),
        "nodes": _nodes(placements, {p.name: size for p in pods}),
    }


def _gang_class(ask: GangAsk) -> GpuClass | None:
    if ask.pods < 1 or ask.pods > MAX_GANG_PODS:
        raise ValidationFailed.on("gang.pods", f"a gang has 1 to {MAX_GANG_PODS} pods")
    if not ask.gpu_class:
        return None
    gpu_class = _gpu_class(ask.gpu_class, "gang.gpu_class")
    if gpu_class.kind == GpuClass.Kind.MIG:
        raise ValidationFailed.on("gang.gpu_class", "a gang holds whole GPUs or shares, not MIG slices")
    if gpu_class.kind == GpuClass.Kind.SHARED and ask.gpus_per_pod != 1:
        raise ValidationFailed.on(
            "gang.gpus_per_pod", "a pod of a shared class holds one share; leave it at 1"
        )
    return gpu_class


def _gang_pod(name: str, gpu_class: GpuClass | None, size: int, who: Who) -> PodRequest:
    if gpu_class is not None:
        return pod_request(name, gpu_class, size, who.slug, who.tier)
    # No class named: whole GPUs of any model.
    cpu, memory = CPU_PER_GPU * size, MEMORY_PER_GPU * size
    return PodRequest(name, cpu, memory, size, MILLI, frozenset(), who.slug, Tier(who.tier))


def _domain(model: FleetModel, placements: Sequence[Placement]) -> dict[str, str] | None:
    """The narrowest topology domain holding every pod of the gang."""
    if not placements:
        return None
    fleet = model.engine.fleet
    for level in reversed(LEVELS):
        keys = {fleet.specs[p.node_index].topology.domain(level, p.node) for p in placements}
        if len(keys) == 1:
            return {"level": level, "name": "/".join(k for k in keys.pop() if k)}
    return {"level": "fleet", "name": model.host_cluster.name}
