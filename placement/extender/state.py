"""The stateful kube-scheduler extender over the placement engine: pure, no Django, no HTTP server.

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

How a v1.Pod is read is `placement.extender.pods`; the wire (`handle`, bodies in, JSON out) is
`placement.extender.http`.

Tenancy: a pod in a namespace the host cluster's feed names as a tenant's (:meth:`Extender.set_tenancy`,
from the namespace's ``gpucloud.io/tenant`` and trust-tier labels) is that tenant's: a standard tenant's
GPUs are its own, trusted tenants share among themselves, a pod of no tenant takes no tenant's GPU
(``Fleet.usable_gpus``), and an isolated tenant, which has no node pool of its own on a host cluster,
shares no node with another tenant. Gangs (`placement.extender.gangs`): the first pod asked about of a gang
not yet reserved makes the engine place the whole gang (``plan_gang``, the gang's topology ask, default
preferred rack) and the extender books every slot under a placeholder of the gang (so no other pod, of any
tenant or gang, can take it); that pod and each next one of the gang are sent to a slot of their own, and
only there. A bound pod takes its slot's place; the placeholders still unclaimed ``gang_seconds`` after
the reservation (the gang did not complete) are dropped, and so is the whole reservation as soon as a pod
of the gang is deleted. MIG: a node's instances of a profile are what it advertises
(allocatable ``nvidia.com/mig-<profile>``, :meth:`Extender.set_mig_allocatable`) less the MIG pods booked
on it; a MIG pod is packed onto the node with the fewest free instances, not ranked by the policy.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from placement.engine.errors import EngineError, UnknownGpuModel
from placement.engine.fleet import Fleet, NodeSpec, PodRequest, Tier
from placement.engine.gang import GangRequest, plan_gang
from placement.engine.placer import Engine
from placement.engine.policies import Policy
from placement.extender.gangs import TOPOLOGY_KEYS, Gang, gang_of
from placement.extender.pods import MIG, ObservedPod, extender_args

MAX_PRIORITY = 10  # kube-scheduler's MaxExtenderPriority
HOPELESS = 3  # reason codes below this: evicting pods on the node could never make room
GANG_SECONDS = 300.0  # a gang not bound whole within this loses what is still reserved for it

Slot = tuple[int, tuple[int, ...]]  # node index, GPU slots
GangPlanner = Callable[[Fleet, GangRequest], list[Slot] | None]


@dataclass
class Reservation:
    """The nodes and GPUs held for a gang's pods: one slot per pod, held by a placeholder or by its pod."""

    gang: Gang
    tid: int | None
    template: PodRequest  # the first pod's request: every slot is sized for it
    slots: list[Slot]
    holders: list[str]  # per slot: the placeholder or pod holding it ("" once its pod is bound elsewhere)
    deadline: float
    claimed: dict[str, int] = field(default_factory=dict)  # pod -> its slot

    def placeholder(self, k: int) -> str:
        return f"gang:{self.gang.key}#{k}"

    def free_slot(self) -> int | None:
        taken = set(self.claimed.values())
        return next((k for k in range(len(self.slots)) if k not in taken), None)


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
        gang_seconds: float = GANG_SECONDS,
        topology_keys: Mapping[str, str] = TOPOLOGY_KEYS,
        gang_planner: GangPlanner = plan_gang,
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
        self.gang_seconds = gang_seconds
        self.topology_keys = dict(topology_keys)
        self.gang_planner = gang_planner
        self.min_members: dict[str, int] = {}  # KAI PodGroup "namespace/name" -> minMember
        self.reservations: dict[str, Reservation] = {}  # gang key -> what is held for it
        self._member_of: dict[str, str] = {}  # pod -> gang key, for every gang pod asked about
        self._bound: dict[str, set[str]] = {}  # gang key -> its pods the cluster reports bound
        self._placeholders: dict[str, str] = {}  # placeholder name -> gang key
        self.gangs_timed_out = 0  # reservations dropped by the timeout, since the start

    # --- the verbs ----------------------------------------------------------------------------

    def filter(self, args: Any) -> dict[str, Any]:
        """ExtenderArgs -> ExtenderFilterResult."""
        pod, names = extender_args(args)
        gang = gang_of(args.get("Pod") or {}, self.topology_keys, self.min_members)
        with self.lock:
            self._forget(pod.name)
            request, tid = self._tenant(pod)
            slot = self._gang_slot(request, tid, gang) if gang else None
            if slot is None or gang is None:
                fits, failed, unresolvable = self._filter(request, tid, names)
            else:
                fits, failed, unresolvable = self._filter_gang(slot, names, gang)
        return {
            "Nodes": None,
            "NodeNames": fits,
            "FailedNodes": failed,
            "FailedAndUnresolvableNodes": unresolvable,
            "Error": "",
        }

    def prioritize(self, args: Any) -> list[dict[str, Any]]:
        """ExtenderArgs -> HostPriorityList; the engine's choice is assumed (booked) at once."""
        pod, names = extender_args(args)
        gang = gang_of(args.get("Pod") or {}, self.topology_keys, self.min_members)
        with self.lock:
            self._forget(pod.name)
            request, tid = self._tenant(pod)
            slot = self._gang_slot(request, tid, gang) if gang else None
            idx = self._index_of(names)
            if isinstance(slot, str) or (isinstance(slot, int) and slot not in idx):
                scores = [0] * len(names)  # the gang does not fit whole, or its slot's node was not asked
            elif isinstance(slot, int) and self._take_slot(request, tid, slot):
                scores = np.where(idx == slot, MAX_PRIORITY, 0).tolist()
            else:
                scores = self._prioritize(request, tid, idx)
        return [{"Host": n, "Score": s} for n, s in zip(names, scores, strict=True)]

    # --- what the cluster reports -------------------------------------------------------------

    def observe(self, pods: Iterable[ObservedPod], *, complete: bool) -> None:
        """Pods bound to nodes; with ``complete`` (a full list) the others not assumed are dropped."""
        with self.lock:
            seen = set()
            for p in pods:
                seen.add(p.request.name)
                if p.request.name in self._member_of:
                    self._gang_bound(p.request.name, self.fleet.index.get(p.node))
                self._book(p)
            if complete:
                now = self.clock()
                for name in [
                    n
                    for n in self._holds
                    if n not in seen and n not in self._placeholders and self.assumed.get(n, 0) <= now
                ]:
                    self._release(name)
                    self.assumed.pop(name, None)
            self._expire_gangs()

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
            self._gang_gone(name)

    def set_min_members(self, groups: Mapping[str, int]) -> None:
        """KAI PodGroups' ``minMember`` by ``namespace/name``: the size of the gang of ``pod-group-name``."""
        with self.lock:
            self.min_members = dict(groups)

    def reserved_gpus(self) -> int:
        """Whole GPUs held by reservations for gang pods not yet there (the benchmarks' idle figure)."""
        with self.lock:
            return sum(
                res.template.num_gpu
                for res in self.reservations.values()
                for h in res.holders
                if h in self._placeholders
            )

    def expire(self) -> None:
        """Drop lapsed assumptions and reservations now (the verbs and the feed do it as they go)."""
        with self.lock:
            self._expire()

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
            self._unassume(name)
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
            self._unassume(name)
        self._expire_gangs()

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

    # --- gangs (inside the lock) ----------------------------------------------------------------

    def _gang_slot(self, pod: PodRequest, tid: int | None, gang: Gang) -> int | str | None:
        """The node of this gang pod's slot, reserving the gang first if need be.

        A string: why the gang cannot be reserved now (its pods wait, holding nothing). None: the pod is
        placed on its own (a MIG pod, a pod already bound, more pods than the gang's size).
        """
        if pod.mig_profile:
            return None
        self._member_of[pod.name] = gang.key
        res = self.reservations.get(gang.key)
        if res is None:
            bound = self._bound.get(gang.key, set())
            if pod.name in bound or gang.size - len(bound) < 1:
                return None
            made = self._reserve(pod, tid, gang, gang.size - len(bound))
            if isinstance(made, str):
                return made
            res = made
        k = res.claimed.get(pod.name)
        if k is None:
            k = res.free_slot()
            if k is None:
                return None
            res.claimed[pod.name] = k
        return res.slots[k][0]

    def _reserve(self, pod: PodRequest, tid: int | None, gang: Gang, count: int) -> Reservation | str:
        """Place ``count`` copies of the pod as one gang and hold every slot under a placeholder."""
        copies = tuple(replace(pod, name=f"{gang.key}#{k}") for k in range(count))
        ask = f"{'required' if gang.required else 'preferred'} {gang.level}"
        try:
            plan = self.gang_planner(self.fleet, GangRequest(gang.key, copies, gang.level, gang.required))
        except EngineError as e:
            return f"gang {gang.key}: {e.what}"
        allowed = self._isolation(tid)
        if plan is None or (allowed is not None and not all(allowed[i] for i, _ in plan)):
            return f"gang {gang.key}: its {count} pods do not fit together now ({ask})"
        res = Reservation(gang, tid, pod, list(plan), [], self.clock() + self.gang_seconds)
        for k, (i, gpus) in enumerate(plan):
            name = res.placeholder(k)
            self._allocate(replace(pod, name=name), i, gpus, tid)
            self._placeholders[name] = gang.key
            res.holders.append(name)
        self.reservations[gang.key] = res
        return res

    def _take_slot(self, pod: PodRequest, tid: int | None, node: int) -> bool:
        """Book the pod in its slot instead of the placeholder (assumed); False if it does not fit there."""
        res = self.reservations[self._member_of[pod.name]]
        k = res.claimed[pod.name]
        holder = res.holders[k]
        if holder == pod.name:
            return True
        if holder:
            self._release(holder)
            self._placeholders.pop(holder, None)
        gpus = res.slots[k][1]
        usable = self.fleet.usable_gpus(pod, tid)[node]
        if not all(usable[g] for g in gpus) or len(gpus) != pod.num_gpu:
            gpus = tuple(int(g) for g in np.flatnonzero(usable)[: pod.num_gpu])
        f = self.fleet
        if len(gpus) < pod.num_gpu or f.cpu_free[node] < pod.cpu_milli or f.mem_free[node] < pod.memory_mib:
            # Larger than the gang's first pod and no room beside it: give the slot back, place it alone.
            if holder:
                self._allocate(replace(res.template, name=holder), node, res.slots[k][1], res.tid)
                self._placeholders[holder] = res.gang.key
            del res.claimed[pod.name]
            return False
        self._allocate(pod, node, gpus, tid)
        res.holders[k] = pod.name
        self.assumed[pod.name] = self.clock() + self.assume_seconds
        return True

    def _unassume(self, name: str) -> None:
        """An assumption dropped: a gang pod's slot goes back to its placeholder, other pods are released."""
        self._release(name)
        res = self.reservations.get(self._member_of.get(name, ""))
        k = res.claimed.get(name) if res else None
        if res is None or k is None or res.holders[k] != name:
            return
        placeholder = res.placeholder(k)
        self._allocate(replace(res.template, name=placeholder), *res.slots[k], res.tid)
        self._placeholders[placeholder] = res.gang.key
        res.holders[k] = placeholder

    def _gang_bound(self, name: str, node: int | None) -> None:
        """A gang pod is reported bound (before it is booked): it takes its slot's place, or, bound
        elsewhere, frees one slot; the reservation ends once the gang is whole."""
        key = self._member_of[name]
        bound = self._bound.setdefault(key, set())
        if name in bound:
            return
        bound.add(name)
        res = self.reservations.get(key)
        if res is None:
            return
        k = res.claimed.get(name)
        if k is None:  # bound without asking for its slot: one slot fewer is needed
            k = res.free_slot()
            if k is not None:
                res.claimed[name] = k
        if k is not None:
            holder = res.holders[k]
            if holder in self._placeholders:
                self._release(holder)
                del self._placeholders[holder]
            res.holders[k] = name if node == res.slots[k][0] else ""
        if len(bound) >= res.gang.size or all(h not in self._placeholders for h in res.holders):
            self._drop(key)

    def _gang_gone(self, name: str) -> None:
        """A gang pod was deleted: the gang will not complete as reserved, so its reservation goes now."""
        key = self._member_of.pop(name, None)
        if key is None:
            return
        self._bound.get(key, set()).discard(name)
        if not self._bound.get(key):
            self._bound.pop(key, None)
        if key in self.reservations:
            self._drop(key)

    def _drop(self, key: str) -> None:
        """Give back every slot of a reservation still held by a placeholder (its pods keep theirs)."""
        res = self.reservations.pop(key)
        for holder in res.holders:
            if holder in self._placeholders:
                self._release(holder)
                del self._placeholders[holder]

    def _expire_gangs(self) -> None:
        # Same lifetime on a monotonic clock: insertion order is deadline order, as for assumptions.
        now = self.clock()
        lapsed = []
        for key, res in self.reservations.items():
            if res.deadline > now:
                break
            lapsed.append(key)
        for key in lapsed:
            self._drop(key)
            self.gangs_timed_out += 1

    def _filter_gang(
        self, slot: int | str, names: Sequence[str], gang: Gang
    ) -> tuple[list[str], dict[str, str], dict[str, str]]:
        """A gang pod passes only its slot's node (and nodes the engine does not know)."""
        idx = self._index_of(names).tolist()
        if isinstance(slot, str):
            why = f"{slot}; it waits, holding nothing"
            return (
                [n for n, i in zip(names, idx, strict=True) if i < 0],
                {n: why for n, i in zip(names, idx, strict=True) if i >= 0},
                {},
            )
        why = f"gang {gang.key}: this pod's GPUs are reserved on {self.fleet.names[slot]}"
        passed = [n for n, i in zip(names, idx, strict=True) if i < 0 or i == slot]
        return passed, {n: why for n, i in zip(names, idx, strict=True) if i >= 0 and i != slot}, {}

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
