"""What an inference endpoint's model server says of itself: its Deployment's status (or, where KServe runs
it, its LLMInferenceService's), read into an `EndpointObservation` the reconciler writes back.

A replica is ready when vLLM answers `/health` (its readiness probe), which it does only once the model is
loaded: so a ready replica is a loaded model. Not a driver: the Kubernetes driver imports it.
"""

from __future__ import annotations

from clusters.render import ClusterProfile
from clusters.spec import EndpointObservation, EndpointSpec
from gpucloud.kube.meta import Manifest


def observe_endpoint(
    endpoint: EndpointSpec, server: Manifest | None, profile: ClusterProfile
) -> EndpointObservation:
    """The endpoint as its model server's object shows it (`server`: None when it is not there yet)."""
    if not profile.inference:
        return EndpointObservation(
            endpoint.public_id,
            0,
            False,
            "this host cluster serves no InferencePool or HTTPRoute (the Gateway API and its Inference "
            "Extension are not installed), so the endpoint is not deployed",
        )
    if server is None:
        return EndpointObservation(endpoint.public_id, 0, False, "waiting for the model server to be created")
    status = server.get("status") or {}
    if server["kind"] == "LLMInferenceService":
        return _from_conditions(endpoint, status)
    ready = int(status.get("readyReplicas") or 0)
    return EndpointObservation(endpoint.public_id, ready, ready > 0, _message(endpoint, ready, status))


def _message(endpoint: EndpointSpec, ready: int, status: Manifest) -> str:
    if endpoint.replicas == 0:
        return "stopped: no replica runs" if ready == 0 else "stopping"
    if ready >= endpoint.replicas:
        return ""
    failures = [
        c.get("message") or c.get("reason") or ""
        for c in status.get("conditions") or []
        if (c.get("type") == "ReplicaFailure" and c.get("status") == "True")
        or (c.get("type") == "Progressing" and c.get("status") == "False")
    ]
    waiting = f"{ready} of {endpoint.replicas} replicas ready (loading the model, or waiting for GPUs)"
    return "; ".join([waiting, *failures])[:500]


def _from_conditions(endpoint: EndpointSpec, status: Manifest) -> EndpointObservation:
    """KServe reports readiness as conditions (`Ready`), not replica counts: a ready service counts as its
    desired replicas."""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            if condition.get("status") == "True":
                return EndpointObservation(endpoint.public_id, endpoint.replicas, endpoint.replicas > 0)
            message = condition.get("message") or condition.get("reason") or "not ready"
            return EndpointObservation(endpoint.public_id, 0, False, f"KServe: {message}"[:500])
    return EndpointObservation(endpoint.public_id, 0, False, "waiting for KServe to report the service")
