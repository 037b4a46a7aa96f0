"""What an endpoint's model server says of itself, in plain words (clusters/drivers/inference_status.py)."""

from __future__ import annotations

from clusters.drivers.inference_status import observe_endpoint
from clusters.render import ClusterProfile
from clusters.tests.render.test_render_inference import endpoint

ROUTED = ClusterProfile(inference=True)


def deployment(**status):
    return {"kind": "Deployment", "status": status}


def test_a_ready_replica_is_a_loaded_model_and_all_ready_says_nothing():
    seen = observe_endpoint(endpoint(replicas=2), deployment(readyReplicas=2), ROUTED)
    assert (seen.replicas_ready, seen.model_loaded, seen.message) == (2, True, "")


def test_replicas_short_say_how_many_and_why_the_deployment_cannot_make_them():
    failure = {
        "type": "ReplicaFailure",
        "status": "True",
        "message": 'pods "ie-chat-x" is forbidden: exceeded quota',
    }
    seen = observe_endpoint(endpoint(replicas=2), deployment(readyReplicas=1, conditions=[failure]), ROUTED)
    assert seen.model_loaded
    assert seen.message == (
        "1 of 2 replicas ready (loading the model, or waiting for GPUs); "
        'pods "ie-chat-x" is forbidden: exceeded quota'
    )


def test_a_stopped_endpoint_and_a_missing_server_say_so():
    assert observe_endpoint(endpoint(replicas=0), deployment(), ROUTED).message == "stopped: no replica runs"
    missing = observe_endpoint(endpoint(), None, ROUTED)
    assert (missing.model_loaded, missing.message) == (False, "waiting for the model server to be created")


def test_kserve_readiness_comes_from_its_ready_condition():
    ready = {"kind": "LLMInferenceService", "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert observe_endpoint(endpoint(replicas=3), ready, ROUTED).replicas_ready == 3
    waiting = {
        "kind": "LLMInferenceService",
        "status": {
            "conditions": [{"type": "Ready", "status": "False", "reason": "MinimumReplicasUnavailable"}]
        },
    }
    seen = observe_endpoint(endpoint(), waiting, ROUTED)
    assert (seen.model_loaded, seen.message) == (False, "KServe: MinimumReplicasUnavailable")


def test_a_cluster_that_cannot_route_says_what_is_missing():
    seen = observe_endpoint(endpoint(), deployment(readyReplicas=1), ClusterProfile())
    assert "Inference Extension are not installed" in seen.message
    assert not seen.model_loaded
