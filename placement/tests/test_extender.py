"""The scheduler-extender protocol over the engine: pods, filter, prioritize, assumed and observed pods."""

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.engine.fleet import NodeSpec, PodRequest
from placement.extender.http import handle
from placement.extender.pods import BadRequest, ObservedPod, pod_request, quantity
from placement.extender.state import MAX_PRIORITY, Extender

NODES = [
    NodeSpec("a", 32_000, 256_000, 8, "G2"),
    NodeSpec("b", 32_000, 256_000, 8, "G2"),
    NodeSpec("t", 16_000, 64_000, 2, "T4"),
]
NAMES = [n.name for n in NODES]


def v1_pod(
    name="p", cpu="4", memory="8Gi", gpus=None, models=(), annotations=None, init=None, ns="ns", mig=None
):
    requests = {"cpu": cpu, "memory": memory}
    if gpus is not None:
        requests["nvidia.com/gpu"] = gpus
    requests.update({f"nvidia.com/mig-{profile}": count for profile, count in (mig or {}).items()})
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if init:
        spec["initContainers"] = [{"name": "i", "resources": {"requests": init}}]
    if models:
        expr = {"key": "nvidia.com/gpu.product", "operator": "In", "values": list(models)}
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expr]}]
                }
            }
        }
    meta = {"name": name, "namespace": ns, "annotations": annotations or {}}
    return {"metadata": meta, "spec": spec}


def args(pod, names=NAMES):
    return {"Pod": pod, "NodeNames": list(names)}


@pytest.mark.parametrize(
    ("text", "value"),
    [("500m", "0.5"), ("2", "2"), ("16Gi", str(16 * 2**30)), ("1e3", "1000"), ("1k", "1000")],
)
def test_quantities_read_as_kubernetes_writes_them(text, value):
    assert quantity(text, "x") == type(quantity("1", "x"))(value)


@pytest.mark.parametrize("bad", ["lots", "-1", "", None, [], True, "1e400"])
def test_a_bad_quantity_is_a_clear_error(bad):
    with pytest.raises(BadRequest):
        quantity(bad, "x")


def test_a_pod_is_read_with_its_largest_init_container_gpus_share_and_models():
    pod = pod_request(v1_pod(cpu="500m", memory="1Gi", gpus="1", init={"cpu": "2"}, models=("G2", "T4")))
    assert pod == PodRequest("ns/p", 2000, 1024, 1, 1000, frozenset({"G2", "T4"}))
    share = pod_request(v1_pod(gpus="1", annotations={"gpucloud.io/gpu-milli": "460"}))
    assert share.is_share
    assert share.gpu_milli == 460
    hami = v1_pod(gpus="1")
    hami["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpucores": "30"}
    assert pod_request(hami).gpu_milli == 300


@pytest.mark.parametrize(
    "pod",
    [
        None,
        {},
        {"metadata": {"name": ""}},
        {"metadata": {"name": "p"}, "spec": {"containers": "no"}},
        {"metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"requests": {"cpu": "x"}}}]}},
        v1_pod(gpus="1.5"),
        v1_pod(gpus="2", annotations={"gpucloud.io/gpu-milli": "500"}),
        v1_pod(mig={"1g.10gb": "500m"}),
        v1_pod(mig={"1g.10gb": "2"}),
        v1_pod(mig={"1g.10gb": "1", "2g.20gb": "1"}),
        v1_pod(mig={"1g.10gb": "lots"}),
        v1_pod(mig={"": "1"}),
        v1_pod(gpus="1", mig={"1g.10gb": "1"}),
    ],
)
def test_a_pod_the_extender_cannot_read_is_a_bad_request(pod):
    with pytest.raises(BadRequest):
        pod_request(pod)


def test_filter_keeps_the_nodes_that_fit_and_says_why_the_others_do_not():
    ext = Extender(NODES, "fgd")
    result = ext.filter(args(v1_pod(gpus="4", models=("G2",)), [*NAMES, "cpu-node"]))
    assert result["NodeNames"] == ["a", "b", "cpu-node"]  # a node gpucloud does not know passes untouched
    assert result["FailedAndUnresolvableNodes"] == {"t": "GPU model is not one the pod accepts (G2)"}
    assert result["Error"] == ""
    assert result["FailedNodes"] == {}
    ext.observe([ObservedPod(PodRequest("ns/big", 30_000, 1000, 1, 1000), "a")], complete=True)
    after = ext.filter(args(v1_pod(gpus="4", models=("G2",))))
    assert after["NodeNames"] == ["b"]
    assert after["FailedNodes"]["a"] == "not enough free CPU for 4000m"


def test_a_model_no_node_has_fails_every_known_node_unresolvably():
    result = Extender(NODES).filter(args(v1_pod(gpus="1", models=("H100",))))
    assert result["NodeNames"] == []
    assert set(result["FailedAndUnresolvableNodes"]) == set(NAMES)


def test_prioritize_gives_the_engines_choice_the_top_score_and_assumes_it():
    ext = Extender(NODES, "best-fit")
    ext.observe([ObservedPod(PodRequest("ns/x", 1000, 1000, 4, 1000), "b")], complete=True)
    ranked = ext.prioritize(args(v1_pod(gpus="2", models=("G2",)), ["a", "b"]))
    assert ranked == [{"Host": "a", "Score": 0}, {"Host": "b", "Score": MAX_PRIORITY}]
    assert ext.fleet.placements()["ns/p"].node == "b"  # booked before any binding is reported
    again = ext.filter(args(v1_pod("q", gpus="2", models=("G2",)), ["b"]))
    assert again["NodeNames"] == ["b"]
    assert ext.fleet.gpu_free[ext.fleet.node("b")].tolist().count(1000) == 2


def test_an_assumption_lapses_unless_the_cluster_confirms_it():
    now = [0.0]
    ext = Extender(NODES, "fgd", assume_seconds=30, clock=lambda: now[0])
    ext.prioritize(args(v1_pod("lost", gpus="1")))
    ext.prioritize(args(v1_pod("kept", gpus="1")))
    node = ext.fleet.placements()["ns/kept"].node
    ext.observe([ObservedPod(PodRequest("ns/kept", 4000, 8192, 1, 1000), node)], complete=False)
    now[0] = 31.0
    ext.filter(args(v1_pod("next")))
    assert set(ext.fleet.placements()) == {"ns/kept"}


def test_the_cluster_wins_where_it_bound_a_pod_elsewhere_and_a_deleted_pod_is_released():
    ext = Extender(NODES, "fgd")
    ext.prioritize(args(v1_pod("p", gpus="1"), ["a", "b"]))
    other = "b" if ext.fleet.placements()["ns/p"].node == "a" else "a"
    ext.observe([ObservedPod(PodRequest("ns/p", 4000, 8192, 1, 1000), other, (3,))], complete=True)
    assert ext.fleet.placements()["ns/p"].node == other
    assert ext.fleet.placements()["ns/p"].gpus == (3,)
    ext.gone("ns/p")
    assert ext.fleet.placements() == {}
    assert int(ext.fleet.gpu_free.clip(0).sum()) == 18_000


def test_a_complete_list_drops_what_the_cluster_no_longer_runs():
    ext = Extender(NODES)
    ext.observe([ObservedPod(PodRequest("ns/old", 1000, 1000, 1, 1000), "a")], complete=True)
    ext.observe([], complete=True)
    assert ext.fleet.placements() == {}


def test_a_pod_asked_about_again_is_not_counted_twice():
    ext = Extender(NODES)
    ext.prioritize(args(v1_pod("p", gpus="8")))
    ext.prioritize(args(v1_pod("p", gpus="8")))
    assert list(ext.fleet.placements()) == ["ns/p"]


# --- tenancy: pods of a tenant's host namespace ----------------------------------------------------

ONE_GPU = [NodeSpec("a", 32_000, 256_000, 1, "G2"), NodeSpec("b", 32_000, 256_000, 1, "G2")]
SHARE = {"gpucloud.io/gpu-milli": "400"}


def tenanted(nodes=ONE_GPU, policy="best-fit", **namespaces):
    ext = Extender(nodes, policy)
    ext.set_tenancy({ns: (f"{ns}-slug", tier) for ns, tier in namespaces.items()})
    return ext


def bind(ext, pod, node):
    """A v1.Pod the cluster reports bound to ``node`` (as the feed hands it over)."""
    ext.observe([ObservedPod(pod_request(pod), node)], complete=False)


def test_a_standard_tenants_share_never_joins_a_gpu_another_tenant_holds():
    ext = tenanted(alpha="standard", beta="standard")
    bind(ext, v1_pod("held", gpus="1", annotations=SHARE, ns="alpha"), "a")
    beta = ext.filter(args(v1_pod(gpus="1", annotations=SHARE, ns="beta"), ["a", "b"]))
    assert beta["NodeNames"] == ["b"]
    assert beta["FailedAndUnresolvableNodes"] == {}
    assert beta["FailedNodes"] == {"a": "GPU shared with another tenant (standard tier: never shares a GPU)"}
    alpha = ext.filter(args(v1_pod(gpus="1", annotations=SHARE, ns="alpha"), ["a", "b"]))
    assert alpha["NodeNames"] == ["a", "b"]  # its own tenant's GPU is open to it


def test_trusted_tenants_share_a_gpu_among_themselves_only():
    ext = tenanted(alpha="trusted", beta="trusted", gamma="standard")
    bind(ext, v1_pod("held", gpus="1", annotations=SHARE, ns="alpha"), "a")
    assert ext.filter(args(v1_pod(gpus="1", annotations=SHARE, ns="beta"), ["a"]))["NodeNames"] == ["a"]
    gamma = ext.filter(args(v1_pod(gpus="1", annotations=SHARE, ns="gamma"), ["a"]))
    assert gamma["NodeNames"] == []
    assert "GPU shared with another tenant" in gamma["FailedNodes"]["a"]


def test_a_pod_of_no_tenant_never_joins_a_tenants_gpu():
    ext = tenanted(alpha="trusted")
    bind(ext, v1_pod("held", gpus="1", annotations=SHARE, ns="alpha"), "a")
    stray = ext.filter(args(v1_pod(gpus="1", annotations=SHARE, ns="kube-system"), ["a"]))
    assert stray["FailedNodes"] == {
        "a": "GPU shared with a tenant (a pod of no tenant takes only GPUs no tenant holds)"
    }


def test_prioritize_chooses_only_gpus_the_sharing_rules_allow_and_books_the_pod_as_its_tenants():
    ext = tenanted(alpha="standard", beta="standard")
    bind(ext, v1_pod("held", gpus="1", annotations=SHARE, ns="alpha"), "a")
    ranked = ext.prioritize(args(v1_pod("p", gpus="1", annotations=SHARE, ns="beta"), ["a", "b"]))
    # best-fit would pack onto a's half-used GPU; beta may not join alpha there
    assert ranked == [{"Host": "a", "Score": 0}, {"Host": "b", "Score": MAX_PRIORITY}]
    assert ext.fleet.gpu_tenants("b", 0) == {"beta-slug (standard)"}
    again = ext.prioritize(args(v1_pod("q", gpus="1", annotations=SHARE, ns="alpha"), ["a", "b"]))
    assert [h["Host"] for h in again if h["Score"] == MAX_PRIORITY] == ["a"]


def test_an_isolated_tenant_shares_no_node_with_another_tenant():
    ext = tenanted(NODES, "fgd", alpha="standard", solo="isolated")
    bind(ext, v1_pod("cpu-only", ns="alpha"), "a")  # any pod of a tenant counts, GPU or not
    solo = ext.filter(args(v1_pod("s", gpus="1", ns="solo"), ["a", "b"]))
    assert solo["NodeNames"] == ["b"]
    assert solo["FailedAndUnresolvableNodes"] == {}
    assert solo["FailedNodes"] == {"a": "node runs pods of another tenant (isolated tier)"}
    ranked = ext.prioritize(args(v1_pod("s", gpus="1", ns="solo"), ["b"]))
    assert ranked == [{"Host": "b", "Score": MAX_PRIORITY}]
    alpha = ext.filter(args(v1_pod("x", gpus="1", ns="alpha"), ["a", "b"]))
    assert alpha["NodeNames"] == ["a"]
    assert alpha["FailedNodes"] == {"b": "node runs pods of an isolated tenant"}
    system = ext.filter(args(v1_pod("y", gpus="1", ns="kube-system"), ["b"]))
    assert system["NodeNames"] == ["b"]  # a pod of no tenant is no other tenant
    ext.gone("solo/s")
    assert ext.filter(args(v1_pod("x", gpus="1", ns="alpha"), ["b"]))["NodeNames"] == ["b"]


def test_a_namespace_relabelled_to_another_tier_rebooks_its_pods_at_the_next_list():
    ext = tenanted(alpha="trusted", beta="trusted")
    held = ObservedPod(pod_request(v1_pod("held", gpus="1", annotations=SHARE, ns="alpha")), "a")
    ext.observe([held], complete=True)
    ext.set_tenancy({"alpha": ("alpha-slug", "standard"), "beta": ("beta-slug", "trusted")})
    ext.observe([held], complete=True)
    assert ext.fleet.gpu_tenants("a", 0) == {"alpha-slug (standard)"}
    beta = ext.filter(args(v1_pod(gpus="1", annotations=SHARE, ns="beta"), ["a"]))
    assert beta["NodeNames"] == []  # alpha is standard now: trusted beta may not join it


# --- MIG: instances as the nodes advertise them ----------------------------------------------------

MIG_1G = {"1g.10gb": "1"}


def test_a_mig_pod_is_read_as_one_instance_of_its_profile():
    pod = pod_request(v1_pod(mig=MIG_1G))
    assert pod.mig_profile == "1g.10gb"
    assert pod.num_gpu == 0
    assert pod.gpu_milli == 0
    assert pod_request(v1_pod(mig={"1g.10gb": "0"})).mig_profile == ""


def test_filter_keeps_only_nodes_with_a_free_instance_of_the_pods_profile():
    ext = Extender(NODES)
    ext.set_mig_allocatable(
        {"a": {"1g.10gb": 1, "2g.20gb": 3}, "b": {"2g.20gb": 1}, "nowhere": {"1g.10gb": 7}}
    )
    result = ext.filter(args(v1_pod(mig=MIG_1G), [*NAMES, "cpu-node"]))
    assert result["NodeNames"] == ["a", "cpu-node"]
    assert result["FailedAndUnresolvableNodes"] == {}
    reason = "no free nvidia.com/mig-1g.10gb instance"
    assert result["FailedNodes"] == {"b": reason, "t": reason}
    whole = ext.filter(args(v1_pod(gpus="8")))
    assert whole["NodeNames"] == ["a", "b"]  # whole-GPU pods are not touched by MIG capacity


def test_bound_mig_pods_use_up_their_nodes_instances_until_they_are_gone():
    ext = Extender(NODES)
    ext.set_mig_allocatable({"a": {"1g.10gb": 2}, "b": {"1g.10gb": 1}})
    bind(ext, v1_pod("one", mig=MIG_1G), "a")
    bind(ext, v1_pod("two", mig=MIG_1G), "a")
    result = ext.filter(args(v1_pod(mig=MIG_1G), ["a", "b"]))
    assert result["NodeNames"] == ["b"]
    assert result["FailedNodes"] == {"a": "no free nvidia.com/mig-1g.10gb instance"}
    ext.gone("ns/one")
    assert ext.filter(args(v1_pod(mig=MIG_1G), ["a", "b"]))["NodeNames"] == ["a", "b"]


def test_prioritize_packs_a_mig_pod_onto_the_node_with_fewest_free_instances_and_books_it():
    ext = Extender(NODES)
    ext.set_mig_allocatable({"a": {"1g.10gb": 3}, "b": {"1g.10gb": 1}})
    ranked = ext.prioritize(args(v1_pod("p", mig=MIG_1G), ["a", "b"]))
    assert ranked == [{"Host": "a", "Score": 0}, {"Host": "b", "Score": MAX_PRIORITY}]
    assert ext.filter(args(v1_pod("q", mig=MIG_1G), ["a", "b"]))["NodeNames"] == ["a"]  # b's one is assumed


def test_a_bad_mig_quantity_is_answered_with_400():
    body = json.dumps(args(v1_pod(mig={"1g.10gb": "2"}))).encode()
    code, answer = handle(Extender(NODES), "filter", body)
    assert code == 400
    assert "one MIG instance of one profile" in answer["Error"]


@pytest.mark.parametrize(
    ("verb", "body", "status"),
    [
        ("filter", b"{", 400),
        ("filter", b"[]", 400),
        ("filter", b'{"Pod": {"metadata": {"name": "p"}}}', 400),  # nodeCacheCapable: false sends Nodes
        ("prioritize", b'{"Pod": 3, "NodeNames": []}', 400),
        ("filter", b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": [1]}', 400),
        ("filter", b"[" * 100_000, 400),
        ("bind", b"{}", 404),
    ],
)
def test_bad_calls_get_a_4xx_with_the_reason(verb, body, status):
    code, answer = handle(Extender(NODES), verb, body)
    assert code == status
    assert answer["Error"]


def test_a_good_call_round_trips_as_json():
    code, answer = handle(Extender(NODES), "filter", json.dumps(args(v1_pod(gpus="1"))).encode())
    assert code == 200
    assert answer["NodeNames"] == NAMES


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
pod_like = st.fixed_dictionaries(
    {"metadata": st.fixed_dictionaries({"name": st.text(min_size=1, max_size=5)}), "spec": json_values}
)


@settings(max_examples=300, deadline=None)
@given(
    verb=st.sampled_from(["filter", "prioritize"]),
    body=st.one_of(
        json_values,
        st.fixed_dictionaries({"Pod": json_values | pod_like, "NodeNames": json_values}),
        st.fixed_dictionaries({"Pod": pod_like, "NodeNames": st.lists(st.sampled_from([*NAMES, "x"]))}),
    ),
)
def test_any_json_gets_an_answer_or_a_400_never_an_exception(verb, body):
    code, answer = handle(Extender(NODES), verb, json.dumps(body).encode())
    assert code in (200, 400)
    assert (code == 400) == (
        "Error" in answer and bool(answer["Error"]) if isinstance(answer, dict) else False
    )


ODD_VALUES = [None, True, 5, -1, 1e308, "x", "1e999999999", "-1e999999999", "sNaN", [], [["x"]], {}, {"a": 1}]


def _paths(value, path=()):
    """Every place in a JSON document: the path to each object member and list item, depth first."""
    yield path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield from _paths(child, (*path, key))


def _replaced(document, path, new):
    copy = json.loads(json.dumps(document))
    *parents, last = path
    target = copy
    for key in parents:
        target = target[key]
    target[last] = new
    return copy


def _every_field() -> dict[str, Any]:
    pod = v1_pod(gpus="1", models=("G2",), annotations={"gpucloud.io/gpu-milli": "500"}, init={"cpu": "1"})
    pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpucores": "30"}
    document: dict[str, Any] = args(pod)
    return document


def _with_node_selector() -> dict[str, Any]:
    document = _every_field()
    document["Pod"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "G2"}
    return document


@pytest.mark.parametrize("document", [_every_field(), _with_node_selector()], ids=["affinity", "selector"])
def test_every_part_of_extender_args_replaced_by_something_odd_gets_an_answer_or_a_400(document):
    unanswered: list[tuple[Any, Any, Any]] = []
    for path in [p for p in _paths(document) if p]:
        for odd in ODD_VALUES:
            body = json.dumps(_replaced(document, path, odd)).encode()
            try:
                code, _ = handle(Extender(NODES), "filter", body)
            except Exception as exc:  # the server would answer 503 "the extender failed"
                unanswered.append((path, odd, repr(exc)))
                continue
            if code not in (200, 400):
                unanswered.append((path, odd, code))
    assert unanswered == []
