"""When the driver considers a live object to match what it would apply."""

from __future__ import annotations

import copy
from typing import Any

from clusters.drivers.in_sync import contains, in_sync
from clusters.render import ClusterProfile, render_tenant
from clusters.tests.conftest import make_tenant


def cluster_queue() -> dict[str, Any]:
    return next(o for o in render_tenant(make_tenant(), ClusterProfile()) if o["kind"] == "ClusterQueue")


def test_server_defaults_and_status_around_the_desired_fields_are_in_sync():
    desired = cluster_queue()
    live = copy.deepcopy(desired)
    live["metadata"].update(uid="u", resourceVersion="9", managedFields=[{"manager": "gpucloud"}])
    live["metadata"]["labels"]["extra"] = "by someone"
    live["spec"]["flavorFungibility"] = {"whenCanBorrow": "MayStopSearch"}
    live["status"] = {"pendingWorkloads": 3}

    assert in_sync(desired, live)


def test_a_changed_value_a_dropped_label_or_another_hash_is_not():
    desired = cluster_queue()
    edited = copy.deepcopy(desired)
    edited["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "40"
    unlabelled = copy.deepcopy(desired)
    del unlabelled["metadata"]["labels"]["gpucloud.io/tenant"]
    rehashed = copy.deepcopy(desired)
    rehashed["metadata"]["annotations"]["gpucloud.io/spec-hash"] = "0" * 16

    assert not in_sync(desired, edited)
    assert not in_sync(desired, unlabelled)
    assert not in_sync(desired, rehashed)


def test_numbers_and_quantities_compare_by_their_text_and_empty_values_may_be_omitted():
    assert contains({"quota": 4, "weight": "2"}, {"quota": "4", "weight": 2})
    assert contains({"podSelector": {}, "x": []}, {})
    assert not contains({"a": [1, 2]}, {"a": [1]})
    assert not contains({"a": "1"}, {"a": {"b": "1"}})
