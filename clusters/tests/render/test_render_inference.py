"""Inference endpoints on the host cluster (clusters/render/inference.py): the objects, checked against the
upstream CRDs (crds/), and their pods against the tenant's own admission policy and Pod Security level."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from clusters.render import ClusterProfile, render_tenant
from clusters.render.inference import ENDPOINT_LABEL, render_endpoints
from clusters.render.kinds import kinds_for
from clusters.spec import EndpointSpec, TenantSpec
from clusters.tests.render.conftest import H200, MIG, quota
from clusters.tests.render.crd_schemas import problems
from tests.judges import admission, pod_security
from tests.judges import quota as quota_judge
from tests.judges.world import world_of

GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/mig-1g.18gb", "nvidia.com/gpumem", "nvidia.com/gpucores")
HAMI = quota(
    "h200-141gb.hami-50",
    "nvidia.com/gpu",
    per_unit=(("nvidia.com/gpumem", 70656), ("nvidia.com/gpucores", 50)),
)


def endpoint(**kwargs: Any) -> EndpointSpec:
    values: dict[str, Any] = {
        "name": "chat",
        "public_id": "ie_0123456789abcdef",
        "model_name": "meta-llama/Llama-3.1-8B-Instruct",
        "source_uri": "hf://meta-llama/Llama-3.1-8B-Instruct",
        "served_model_name": "llama-8b",
        "revision": "main",
        "engine_args": ("--enable-prefix-caching",),
        "gpu_class": "h200-141gb",
        "resource_name": "nvidia.com/gpu",
        "node_labels": H200,
        "gpus_per_replica": 2,
        "replicas": 1,
        "context_length": 8192,
    }
    values.update(kwargs)
    return EndpointSpec(**values)


ENDPOINTS = (
    endpoint(),
    endpoint(
        name="weights",
        public_id="ie_pvc",
        source_uri="pvc://models/qwen",
        engine_args=("-tp", "1", "-pp", "2"),
    ),
    endpoint(
        name="stream", public_id="ie_s3", source_uri="s3://bucket/qwen", replicas=0, context_length=None
    ),
)


def tenant(
    tier: str = "standard", endpoints: tuple[EndpointSpec, ...] = ENDPOINTS, **kwargs: Any
) -> TenantSpec:
    quotas = {"isolated": (quota(),), "standard": (quota(), MIG), "trusted": (quota(), MIG, HAMI)}[tier]
    values: dict[str, Any] = {
        "slug": "acme",
        "public_id": "ten_acme",
        "trust_tier": tier,
        "desired": "running",
        "namespace": "tenant-acme",
        "quotas": quotas,
        "endpoints": endpoints,
        "dedicated_nodes": ("gpu-1",) if tier == "isolated" else (),
    }
    values.update(kwargs)
    return TenantSpec(**values)


def profile(**kwargs: Any) -> ClusterProfile:
    return ClusterProfile(inference=True, gpu_resources=GPU_RESOURCES, **kwargs)


PROFILES = {
    "kueue": profile(),
    "kai": profile(scheduler="kai"),
    "kserve": profile(kserve=True),
    "kai-kserve": profile(scheduler="kai", kserve=True),
}


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def test_each_endpoint_gets_a_deployment_a_service_a_pool_and_a_route():
    objects = render_endpoints(tenant(), PROFILES["kueue"])
    assert [o["kind"] for o in objects[:4]] == ["Deployment", "Service", "InferencePool", "HTTPRoute"]
    assert {o["metadata"]["name"] for o in objects} == {"ie-chat", "ie-weights", "ie-stream"}
    deployment, service, pool, route = objects[:4]
    assert deployment["spec"]["replicas"] == 1
    assert pool["spec"]["selector"]["matchLabels"] == {ENDPOINT_LABEL: "ie_0123456789abcdef"}
    assert service["spec"]["selector"] == pool["spec"]["selector"]["matchLabels"]
    template = deployment["spec"]["template"]
    assert pool["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    assert pool["spec"]["endpointPickerRef"] == {
        "kind": "Service", "name": "ie-chat-epp", "port": {"number": 9002}, "failureMode": "FailClose"
    }  # fmt: skip
    assert route["spec"]["parentRefs"][0]["name"] == "gpucloud-inference"
    assert route["spec"]["rules"][0]["backendRefs"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "ie-chat"}
    ]
    assert route["spec"]["rules"][0]["matches"][0]["headers"][0]["value"] == "ie_0123456789abcdef"


def test_the_model_server_runs_vllm_with_the_platforms_flags_then_the_endpoints():
    deployment, *_ = render_endpoints(tenant(), PROFILES["kueue"])
    (main,) = deployment["spec"]["template"]["spec"]["containers"]
    assert main["command"] == ["vllm", "serve"]
    assert main["args"] == [
        "meta-llama/Llama-3.1-8B-Instruct", "--host", "0.0.0.0", "--port", "8000", "--revision", "main",
        "--served-model-name", "llama-8b", "--max-model-len", "8192", "--tensor-parallel-size", "2",
        "--enable-prefix-caching",
    ]  # fmt: skip
    assert main["resources"]["requests"]["nvidia.com/gpu"] == "2"
    assert main["resources"]["limits"]["nvidia.com/gpu"] == "2"


def test_a_pvc_source_is_mounted_read_only_and_an_object_store_is_streamed():
    objects = render_endpoints(tenant(), PROFILES["kueue"])
    pvc, s3 = of_kind(objects, "Deployment")[1:]
    pod = pvc["spec"]["template"]["spec"]
    assert {"name": "model", "persistentVolumeClaim": {"claimName": "models", "readOnly": True}} in pod[
        "volumes"
    ]
    args = pod["containers"][0]["args"]
    assert args[0] == "/models/qwen"
    assert "--tensor-parallel-size" not in args  # the endpoint's own -tp/-pp stand
    assert s3["spec"]["template"]["spec"]["containers"][0]["args"][:1] == ["s3://bucket/qwen"]
    assert "runai_streamer" in s3["spec"]["template"]["spec"]["containers"][0]["args"]
    assert s3["spec"]["replicas"] == 0


def test_kserve_runs_the_model_server_where_it_is_present():
    objects = render_endpoints(tenant(), PROFILES["kserve"])
    assert not of_kind(objects, "Deployment")
    service = of_kind(objects, "LLMInferenceService")[0]
    assert service["spec"]["model"] == {
        "uri": "hf://meta-llama/Llama-3.1-8B-Instruct:main",
        "name": "llama-8b",
    }
    assert service["spec"]["parallelism"] == {"tensor": 2}
    assert service["spec"]["labels"][ENDPOINT_LABEL] == "ie_0123456789abcdef"
    assert "router" not in service["spec"]


def test_nothing_is_rendered_where_the_cluster_cannot_route_or_the_tenant_is_not_running():
    assert render_endpoints(tenant(), ClusterProfile()) == []
    assert render_endpoints(tenant(desired="suspended"), PROFILES["kueue"]) == []
    asleep = render_endpoints(tenant(asleep=True), PROFILES["kueue"])
    assert {d["spec"]["replicas"] for d in of_kind(asleep, "Deployment")} == {0}
    assert not {k.kind for k in kinds_for(ClusterProfile())} & {"Deployment", "InferencePool", "HTTPRoute"}
    assert [k.kind for k in kinds_for(PROFILES["kserve"])][-3:] == [
        "LLMInferenceService",
        "InferencePool",
        "HTTPRoute",
    ]


ALL = [(name, tier) for name in PROFILES for tier in ("isolated", "standard", "trusted")]


@pytest.mark.parametrize(("name", "tier"), ALL)
def test_every_custom_resource_rendered_passes_its_upstream_crd(name, tier):
    objects = render_endpoints(tenant(tier), PROFILES[name])
    custom = [o for o in objects if o["kind"] in ("InferencePool", "HTTPRoute", "LLMInferenceService")]
    assert len(custom) == 6 + (3 if "kserve" in name else 0)
    for manifest in custom:
        assert problems(manifest) == [], f"{manifest['kind']} {manifest['metadata']['name']}"


def test_the_crd_check_refuses_what_upstream_refuses():
    pool = of_kind(render_endpoints(tenant(), PROFILES["kueue"]), "InferencePool")[0]
    unknown = {**pool, "spec": {**pool["spec"], "targetPortNumber": 8000}}
    assert any("targetPortNumber" in p for p in problems(unknown))
    no_port = {**pool, "spec": {**pool["spec"], "endpointPickerRef": {"name": "epp"}}}
    assert any("port is required" in p for p in problems(no_port))
    route = of_kind(render_endpoints(tenant(), PROFILES["kueue"]), "HTTPRoute")[0]
    bad_path = copy_with_path(route, "v1//chat")
    assert problems(bad_path)


def copy_with_path(route: dict[str, Any], path: str) -> dict[str, Any]:
    rule = route["spec"]["rules"][0]
    match = {**rule["matches"][0], "path": {"type": "PathPrefix", "value": path}}
    return {**route, "spec": {**route["spec"], "rules": [{**rule, "matches": [match]}]}}


def pods_of(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods the model servers would make: the Deployment's template, KServe's `template` and `labels`."""
    pods = []
    for o in objects:
        if o["kind"] == "Deployment":
            metadata, spec = o["spec"]["template"]["metadata"], o["spec"]["template"]["spec"]
        elif o["kind"] == "LLMInferenceService":
            metadata, spec = {"labels": o["spec"]["labels"]}, o["spec"]["template"]
        else:
            continue
        name = o["metadata"]["name"] + "-0"
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {**metadata, "name": name, "namespace": o["metadata"]["namespace"]},
                "spec": spec,
            }
        )
    return pods


@pytest.mark.parametrize(("name", "tier"), ALL)
def test_the_pods_pass_the_tenants_admission_policy_and_its_pod_security_level(name, tier):
    restricted = replace(
        PROFILES[name],
        pod_security=(("isolated", "restricted"), ("standard", "restricted"), ("trusted", "restricted")),
    )
    spec = tenant(
        tier,
        endpoints=ENDPOINTS
        + (
            (
                endpoint(
                    name="frac",
                    public_id="ie_hami",
                    gpu_class=HAMI.gpu_class,
                    per_unit=HAMI.per_unit,
                    gpus_per_replica=1,
                    engine_args=(),
                ),
            )
            if tier == "trusted"
            else ()
        ),
    )
    world = world_of(restricted, [spec])
    pods = pods_of(render_tenant(spec, restricted))
    assert pods
    for pod in pods:
        assert admission.judge(pod, world) == [], pod["metadata"]["name"]
        assert pod_security.judge(pod, world) == [], pod["metadata"]["name"]
        assert quota_judge.judge(pod, world) == [], pod["metadata"]["name"]


def test_every_container_states_its_cpu_and_memory_limits_so_the_limitrange_defaults_never_apply():
    """The namespace's LimitRange gives a container without limits a default CPU limit of 2, below a
    replica's request: the API server would refuse such a pod (requests must not exceed limits)."""
    for name, profile_ in PROFILES.items():
        for pod in pods_of(render_endpoints(tenant(), profile_)):
            for container in pod["spec"]["containers"]:
                requests, limits = container["resources"]["requests"], container["resources"]["limits"]
                assert {"cpu", "memory"} <= limits.keys(), name
                assert requests["cpu"] == limits["cpu"], name


def test_the_admission_judge_would_refuse_a_pod_outside_the_tenants_queue():
    world = world_of(PROFILES["kueue"], [tenant()])
    pod = pods_of(render_tenant(tenant(), PROFILES["kueue"]))[0]
    pod["metadata"]["labels"] = {k: v for k, v in pod["metadata"]["labels"].items() if "kueue" not in k}
    assert any("queue" in m for m in admission.judge(pod, world))
