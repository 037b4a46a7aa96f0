"""KAI PodGroups read as waiting workloads (clusters/drivers/kai_pod_groups.py) and Kueue's visibility answer
read as positions (clusters/drivers/kueue_workloads.py `positions`): pure functions, no cluster."""

from __future__ import annotations

from typing import Any

from clusters.drivers.kai_pod_groups import pod_group_of, priorities, unallocated
from clusters.drivers.kueue_workloads import positions
from clusters.tests.conftest import make_tenant

PRIORITY = priorities(
    [
        {"metadata": {"name": "high"}, "value": 1000},
        {"metadata": {"name": "normal"}, "value": 10, "globalDefault": True},
    ]
)


def group(min_member: int = 2, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "train",
            "namespace": "tenant-acme",
            "creationTimestamp": "2026-05-01T10:00:00Z",
        },
        "spec": {"minMember": min_member, "queue": "tenant-acme", "priorityClassName": "high"},
        "status": status,
    }


def pod(
    resource: str = "nvidia.com/gpu", units: str = "2", node: str = "", phase: str = "Pending"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {resource: units}}}]}
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {"annotations": {"pod-group-name": "train"}},
        "spec": spec,
        "status": {"phase": phase},
    }


def test_a_group_short_of_bound_pods_waits_with_kais_words_and_its_class_priority():
    seen = pod_group_of(
        group(
            2, conditions=[{"type": "Unschedulable", "reason": "Unschedulable", "message": "no node fits"}]
        ),
        [pod(), pod(node="h200-1", phase="Running")],
        make_tenant(),
        PRIORITY,
    )

    assert seen is not None
    assert (seen.name, seen.queue, seen.pods, seen.gpus, seen.gpu_class) == (
        "train",
        "tenant-acme",
        2,
        4,
        "h200-141gb",
    )
    assert (seen.priority, seen.message, seen.position) == (1000, "no node fits", None)
    assert seen.created_at is not None


def test_missing_pods_count_as_the_average_one_and_a_mig_slice_names_its_class():
    seen = pod_group_of(group(4), [pod("nvidia.com/mig-1g.18gb", "1")], make_tenant(), PRIORITY)

    assert seen is not None
    assert (seen.pods, seen.gpus, seen.gpu_class) == (4, 4, "h200-141gb.mig-1g.18gb")


def test_a_group_bound_in_full_finished_or_without_pods_does_not_wait():
    tenant = make_tenant()
    assert pod_group_of(group(2), [pod(node="a"), pod(node="b")], tenant, PRIORITY) is None
    assert pod_group_of(group(2), [pod(phase="Succeeded"), pod(phase="Failed")], tenant, PRIORITY) is None
    assert pod_group_of(group(2), [], tenant, PRIORITY) is None


def test_no_priority_class_named_is_the_global_default_and_an_unknown_one_too():
    plain = group(1)
    del plain["spec"]["priorityClassName"]
    seen = pod_group_of(plain, [pod()], make_tenant(), PRIORITY)
    assert seen is not None
    assert seen.priority == 10
    assert priorities([])[""] == 0
    assert priorities([])["system-node-critical"] == 2000001000


def test_the_latest_unschedulable_condition_speaks_through_its_reasons_when_it_has_no_message():
    status = {
        "schedulingConditions": [
            {
                "type": "UnschedulableOnNodePool",
                "transitionID": "3",
                "status": "True",
                "message": "",
                "reasons": [{"reason": "OverLimit", "message": "queue over its limit"}],
            },
            {"type": "UnschedulableOnNodePool", "transitionID": "1", "status": "True", "message": "old"},
        ]
    }

    seen = pod_group_of(group(1, **status), [pod()], make_tenant(), PRIORITY)

    assert seen is not None
    assert seen.message == "queue over its limit"


def test_a_group_holding_gpus_is_not_a_candidate():
    assert unallocated(group())
    assert unallocated(group(resourcesStatus={"allocated": {"nvidia.com/gpu": "0"}}))
    assert not unallocated(group(resourcesStatus={"allocated": {"nvidia.com/gpu": "2"}}))
    assert not unallocated(group(resourcesStatus={"allocatedNonPreemptible": {"cpu": "4"}}))


def test_kueues_zero_based_places_become_one_based_and_malformed_items_are_skipped():
    summary = {
        "items": [
            {"metadata": {"name": "b"}, "positionInLocalQueue": 0, "positionInClusterQueue": 3},
            {"metadata": {"name": "a"}, "positionInLocalQueue": 1, "positionInClusterQueue": 5},
            {"metadata": {"name": "x"}, "positionInLocalQueue": "first"},
            {"metadata": {}, "positionInLocalQueue": 2},
        ]
    }

    assert positions(summary) == {"b": 1, "a": 2}
    assert positions({}) == {}
