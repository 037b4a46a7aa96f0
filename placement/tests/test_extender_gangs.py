"""Gangs in the scheduler extender: who is a gang, reservation, timeout, deletion, concurrent calls."""

import json
import threading

import pytest

from placement.engine.fleet import NodeSpec, Tier, Topology
from placement.extender.feed import node_spec
from placement.extender.gangs import Gang, gang_of, level_of
from placement.extender.http import handle
from placement.extender.pods import BadRequest, ObservedPod, pod_request
from placement.extender.state import Extender


def node(name, block, rack):
    return NodeSpec(name, 64_000, 512_000, 8, "H100", Topology("z", block, f"{block}-{rack}", ""))


# Rack b1-r1 has two 8-GPU nodes, rack b1-r2 one, rack b2-r1 three.
NODES = [
    node("n1", "b1", "r1"),
    node("n2", "b1", "r1"),
    node("n3", "b1", "r2"),
    node("n4", "b2", "r1"),
    node("n5", "b2", "r1"),
    node("n6", "b2", "r1"),
]
NAMES = [n.name for n in NODES]


def pod(name, gpus=8, ns="team", labels=None, annotations=None):
    requests = {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": str(gpus)}
    meta = {"name": name, "namespace": ns, "labels": labels or {}, "annotations": annotations or {}}
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}}


def kueue(name, group, count, ns="team", gpus=8, **annotations):
    notes = {"kueue.x-k8s.io/pod-group-total-count": str(count), **annotations}
    return pod(name, gpus, ns, {"kueue.x-k8s.io/pod-group-name": group}, notes)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def schedule(ext, v1, names=NAMES):
    """kube-scheduler's round: filter, then prioritize the nodes that passed; the best one, or None."""
    passed = ext.filter({"Pod": v1, "NodeNames": list(names)})["NodeNames"]
    if not passed:
        return None
    scores = ext.prioritize({"Pod": v1, "NodeNames": passed})
    return max(scores, key=lambda h: h["Score"])["Host"]


def bind(ext, v1, host):
    ext.observe([ObservedPod(pod_request(v1), host)], complete=False)


def free_gpus(ext):
    return int((ext.fleet.gpu_free.clip(min=0) // 1000).sum())


# --- gang identity ---------------------------------------------------------------------------------


def test_kueue_pod_group():
    assert gang_of(kueue("a", "g", 4)) == Gang("team/kueue/g", 4, "rack", False, "kueue")


def test_kueue_pod_group_without_its_count_is_a_clear_error():
    with pytest.raises(BadRequest, match="pod-group-total-count"):
        gang_of(pod("a", labels={"kueue.x-k8s.io/pod-group-name": "g"}))


@pytest.mark.parametrize("count", ["0", "x", "-3", "99999"])
def test_a_bad_count_is_a_clear_error(count):
    with pytest.raises(BadRequest, match="whole number"):
        gang_of(kueue("a", "g", count))


def test_jobset_replicated_job_is_one_gang_of_its_replicas():
    labels = {
        "jobset.sigs.k8s.io/jobset-name": "train",
        "jobset.sigs.k8s.io/replicatedjob-name": "workers",
        "jobset.sigs.k8s.io/replicatedjob-replicas": "4",
        "jobset.sigs.k8s.io/job-index": "2",
    }
    assert gang_of(pod("a", labels=labels)) == Gang("team/jobset/train/workers", 4, "rack", False, "jobset")
    sized = gang_of(pod("a", labels=labels, annotations={"gpucloud.io/gang-size": "8"}))
    assert sized is not None
    assert sized.size == 8


def test_leaderworkerset_group():
    labels = {"leaderworkerset.sigs.k8s.io/name": "llm", "leaderworkerset.sigs.k8s.io/group-index": "1"}
    found = gang_of(pod("a", labels=labels, annotations={"leaderworkerset.sigs.k8s.io/size": "2"}))
    assert found == Gang("team/lws/llm/1", 2, "rack", False, "lws")
    assert gang_of(pod("a", labels=labels)) is None  # not stamped with its size yet


def test_kai_pod_group_takes_min_member_when_known():
    v1 = pod("a", annotations={"pod-group-name": "pg-1"})
    assert gang_of(v1) is None
    assert gang_of(v1, min_members={"team/pg-1": 3}) == Gang("team/kai/pg-1", 3, "rack", False, "kai")
    other_ns = gang_of(v1, min_members={"other/pg-1": 3})
    assert other_ns is None


def test_a_pod_of_no_gang_or_a_gang_of_one():
    assert gang_of(pod("a")) is None
    assert gang_of(kueue("a", "g", 1)) is None


@pytest.mark.parametrize(
    ("key", "level"),
    [
        ("cloud.provider.com/topology-block", "block"),
        ("cloud.provider.com/topology-rack", "rack"),
        ("example.com/rack", "rack"),
        ("nvidia.com/gpu.clique", "nvlink"),
        ("kubernetes.io/hostname", "node"),
        ("topology.kubernetes.io/zone", "zone"),
    ],
)
def test_tas_annotations_map_to_engine_levels(key, level):
    assert level_of(key) == level
    required = gang_of(kueue("a", "g", 2, **{"kueue.x-k8s.io/podset-required-topology": key}))
    preferred = gang_of(kueue("a", "g", 2, **{"kueue.x-k8s.io/podset-preferred-topology": key}))
    assert required is not None
    assert (required.level, required.required) == (level, True)
    assert preferred is not None
    assert (preferred.level, preferred.required) == (level, False)


def test_an_unknown_topology_key_is_a_clear_error():
    with pytest.raises(BadRequest, match="not a level"):
        gang_of(kueue("a", "g", 2, **{"kueue.x-k8s.io/podset-required-topology": "example.com/row"}))


# --- reservation ------------------------------------------------------------------------------------


def test_first_pod_reserves_the_gang_in_one_rack_and_the_rest_follow():
    ext = Extender(NODES, "best-fit", clock=Clock())
    pods = [kueue(f"w{k}", "g", 3) for k in range(3)]
    first = schedule(ext, pods[0])
    assert free_gpus(ext) == 48 - 24  # the whole gang is held at once
    hosts = [first] + [schedule(ext, p) for p in pods[1:]]
    assert len(set(hosts)) == 3
    racks = {NODES[NAMES.index(h)].topology.rack for h in hosts}
    assert racks == {"b2-r1"}  # the only rack with three free nodes
    assert free_gpus(ext) == 24  # the pods took their slots, nothing more


def test_a_gang_pod_passes_only_its_reserved_node():
    ext = Extender(NODES, "best-fit", clock=Clock())
    result = ext.filter({"Pod": kueue("w0", "g", 2), "NodeNames": [*NAMES, "cpu-node"]})
    assert len(result["NodeNames"]) == 2
    assert "cpu-node" in result["NodeNames"]
    assert all("reserved" in why for why in result["FailedNodes"].values())


def test_another_tenants_pod_cannot_take_reserved_gpus():
    ext = Extender(NODES, "best-fit", clock=Clock())
    ext.set_tenancy({"team": ("team", Tier.STANDARD), "rival": ("rival", Tier.STANDARD)})
    schedule(ext, kueue("w0", "g", 3))  # reserves three whole nodes of rack b2-r1
    outsiders = [pod(f"x{k}", ns="rival") for k in range(3)]
    hosts = [schedule(ext, p) for p in outsiders]
    assert sorted(hosts) == ["n1", "n2", "n3"]
    assert schedule(ext, pod("x4", ns="rival")) is None  # nothing left but the gang's reservation
    assert schedule(ext, pod("stray", ns="other-gang")) is None
    assert {schedule(ext, kueue(f"w{k}", "g", 3)) for k in (1, 2)} <= {"n4", "n5", "n6"}


def test_a_gang_that_does_not_fit_whole_holds_nothing():
    ext = Extender(NODES, "best-fit", clock=Clock())
    gang = kueue("w0", "big", 7)
    result = ext.filter({"Pod": gang, "NodeNames": NAMES})
    assert result["NodeNames"] == []
    assert all("do not fit together" in why for why in result["FailedNodes"].values())
    assert free_gpus(ext) == 48
    assert ext.reservations == {}


def test_required_rack_is_kept_and_preferred_goes_wider():
    required = {"kueue.x-k8s.io/podset-required-topology": "example.com/rack"}
    ext = Extender(NODES, "best-fit", clock=Clock())
    assert ext.filter({"Pod": kueue("w0", "r", 4, **required), "NodeNames": NAMES})["NodeNames"] == []
    assert schedule(ext, kueue("w0", "p", 4)) is not None  # preferred rack: falls back to a block


def test_bound_pods_replace_their_slots_and_the_reservation_ends_when_whole():
    clock = Clock()
    ext = Extender(NODES, "best-fit", clock=clock, assume_seconds=10)
    pods = [kueue(f"w{k}", "g", 2) for k in range(2)]
    for p in pods:
        bind(ext, p, schedule(ext, p))
    assert ext.reservations == {}
    clock.now = 1000  # assumptions and any reservation long lapsed: the bound pods still hold their GPUs
    ext.expire()
    assert free_gpus(ext) == 48 - 16


def test_timeout_frees_what_the_gang_still_holds():
    clock = Clock()
    ext = Extender(NODES, "best-fit", clock=clock, gang_seconds=300, assume_seconds=1e9)
    first = kueue("w0", "g", 3)
    bind(ext, first, schedule(ext, first))
    assert free_gpus(ext) == 24
    clock.now = 299
    ext.expire()
    assert free_gpus(ext) == 24
    clock.now = 301
    ext.expire()
    assert free_gpus(ext) == 40  # only the bound pod holds GPUs now
    assert ext.gangs_timed_out == 1
    assert ext.reservations == {}


def test_after_a_timeout_the_rest_of_the_gang_reserves_only_what_is_missing():
    clock = Clock()
    ext = Extender(NODES, "best-fit", clock=clock, gang_seconds=300, assume_seconds=1e9)
    first = kueue("w0", "g", 3)
    bind(ext, first, schedule(ext, first))
    clock.now = 400
    ext.expire()
    schedule(ext, kueue("w1", "g", 3))
    assert free_gpus(ext) == 48 - 8 - 16


def test_deleting_a_gang_pod_drops_the_reservation_at_once():
    ext = Extender(NODES, "best-fit", clock=Clock(), assume_seconds=1e9)
    first = kueue("w0", "g", 3)
    host = schedule(ext, first)
    bind(ext, first, host)
    ext.gone("team/w0")
    assert free_gpus(ext) == 48
    assert ext.reservations == {}


def test_a_pod_asked_again_keeps_its_slot():
    ext = Extender(NODES, "best-fit", clock=Clock())
    first = kueue("w0", "g", 2)
    host = schedule(ext, first)
    assert schedule(ext, first) == host
    assert free_gpus(ext) == 32


def test_a_complete_list_does_not_drop_placeholders():
    ext = Extender(NODES, "best-fit", clock=Clock())
    schedule(ext, kueue("w0", "g", 3))
    ext.observe([], complete=True)
    assert free_gpus(ext) == 24


def test_concurrent_calls_never_double_book():
    ext = Extender(NODES, "best-fit", clock=Clock())
    ext.set_tenancy({"team": ("team", Tier.STANDARD), "rival": ("rival", Tier.STANDARD)})
    hosts: dict[str, str | None] = {}

    def run(v1):
        hosts[v1["metadata"]["name"]] = schedule(ext, v1)

    work = [kueue(f"w{k}", "g", 3) for k in range(3)] + [pod(f"x{k}", ns="rival") for k in range(4)]
    threads = [threading.Thread(target=run, args=(v1,)) for v1 in work]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gang_hosts = [hosts[f"w{k}"] for k in range(3)]
    assert None not in gang_hosts
    assert len(set(gang_hosts)) == 3
    outsiders = [h for k in range(4) if (h := hosts[f"x{k}"])]
    assert len(outsiders) == 3
    assert not set(outsiders) & set(gang_hosts)
    assert (ext.fleet.gpu_free >= 0).all()


def test_a_gang_pod_whose_node_was_not_asked_keeps_waiting_for_its_slot():
    ext = Extender(NODES, "best-fit", clock=Clock())
    v1 = kueue("w0", "g", 2)
    slot_node = ext.filter({"Pod": v1, "NodeNames": NAMES})["NodeNames"][0]
    others = [n for n in NAMES if n != slot_node]
    assert {h["Score"] for h in ext.prioritize({"Pod": v1, "NodeNames": others})} == {0}
    assert free_gpus(ext) == 32  # the two slots, and nothing booked beside them


def test_the_feed_reads_a_nodes_topology_from_its_labels():
    labels = {
        "nvidia.com/gpu.product": "H100",
        "topology.kubernetes.io/zone": "z1",
        "cloud.provider.com/topology-block": "b7",
        "cloud.provider.com/topology-rack": "r3",
        "nvidia.com/gpu.clique": "c1.0",
        "kubernetes.io/hostname": "n9",
        "unrelated.example.com/row": "x",
    }
    node = {"metadata": {"name": "n9", "labels": labels}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
    assert node_spec(node).topology == Topology("z1", "b7", "r3", "c1.0")
    assert node_spec({"metadata": {"name": "bare"}, "status": {}}).topology == Topology()


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_a_bad_gang_annotation_is_a_400_naming_it(verb):
    body = json.dumps({"Pod": kueue("w0", "g", "many"), "NodeNames": NAMES}).encode()
    code, answer = handle(Extender(NODES), verb, body)
    assert code == 400
    assert "pod-group-total-count" in answer["Error"]
