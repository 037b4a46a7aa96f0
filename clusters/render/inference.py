"""A tenant's inference endpoints on its host cluster: the model server, the pool that routes to it, and the
route on the platform's Gateway (docs/inference.md).

Per endpoint, in the tenant's host namespace, named `ie-<name>`:
- the model server: a vLLM `Deployment` (apps/v1) and a `Service` (v1) in front of it, or, where KServe
  serves it, an `LLMInferenceService` (serving.kserve.io/v1alpha2) whose workload KServe runs (its storage
  initializer downloads the model; `router` is left out, as the pool and route below are gpucloud's either
  way);
- an `InferencePool` (inference.networking.k8s.io/v1) selecting the endpoint's pods by
  `gpucloud.io/inference-endpoint=<id>`, with its endpoint picker `ie-<name>-epp` (port 9002);
- an `HTTPRoute` (gateway.networking.k8s.io/v1) on the platform Gateway, sending requests that carry
  `X-Gpucloud-Endpoint: <id>` to the pool. The gateway sets that header once it has checked the caller's key,
  so two tenants serving the same model name never meet on one route.

The pods are the tenant's pods and are held to the same rules as those its vCluster syncs: the GPUs of one
replica asked for by the class's resource name (HAMi's memory and cores with it), on the class's nodes (an
isolated tenant's dedicated nodes, with their toleration), through the tenant's Kueue LocalQueue (label) or
KAI queue (label and scheduler name) with the inference priority, and a container security context that passes
the `restricted` Pod Security Standard, the strictest level any tier enforces. The tier's admission policy
(`clusters.render.admission`) admits them; clusters/tests/render/test_render_inference.py checks it.

Every shape here was checked against the upstream CRDs, kept as test fixtures in clusters/tests/render/crds/.
"""

from __future__ import annotations

from typing import Any

from clusters.spec import EndpointSpec, TenantSpec
from gpucloud.kube.meta import DEDICATED_TO, Manifest, obj, owned

from . import admission, kai, kueue
from .profile import ClusterProfile
from .vcluster import node_selector, restricted_security_context

DEPLOYMENT_API, SERVICE_API = "apps/v1", "v1"
POOL_API = "inference.networking.k8s.io/v1"
ROUTE_API = "gateway.networking.k8s.io/v1"
KSERVE_API = "serving.kserve.io/v1alpha2"
COMPONENT = admission.COMPONENT
COMPONENT_VALUE = "inference"  # the driver lists Deployments and Services by it
ENDPOINT_LABEL = "gpucloud.io/inference-endpoint"
ROUTE_HEADER = "X-Gpucloud-Endpoint"
PORT, EPP_PORT = 8000, 9002
PRIORITY_CLASS = "gpucloud-inference"
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MODELS_DIR, CACHE_DIR = "/models", "/cache"
# vLLM's image runs as root unless told otherwise; any non-zero uid works when HOME is writable.
RUN_AS = 1000
STARTUP_MINUTES = 60  # a large model may take this long to download and load before it is ready


def object_name(endpoint: EndpointSpec) -> str:
    return f"ie-{endpoint.name}"


def picker_name(endpoint: EndpointSpec) -> str:
    return f"ie-{endpoint.name}-epp"


def render_endpoints(tenant: TenantSpec, profile: ClusterProfile) -> list[Manifest]:
    """Every object of the tenant's endpoints; none where the cluster cannot route to them (the profile says
    whether it serves InferencePool and HTTPRoute) or while the tenant is suspended or asleep."""
    if not profile.inference or tenant.desired != "running":
        return []
    objects: list[Manifest] = []
    for endpoint in tenant.endpoints:
        replicas = 0 if tenant.asleep else endpoint.replicas
        if profile.kserve:
            objects.append(render_llm_inference_service(tenant, endpoint, profile, replicas))
        else:
            objects += [
                render_deployment(tenant, endpoint, profile, replicas),
                render_service(tenant, endpoint),
            ]
        objects += [render_pool(tenant, endpoint), render_route(tenant, endpoint, profile)]
    return objects


# --- the pods --------------------------------------------------------------------------------------------


def selector(endpoint: EndpointSpec) -> dict[str, str]:
    return {ENDPOINT_LABEL: endpoint.public_id}


def queue_labels(tenant: TenantSpec, profile: ClusterProfile) -> dict[str, str]:
    """The label that puts a pod in the tenant's queue, as its admission policy requires."""
    if profile.scheduler == "kai":
        return {admission.KAI_QUEUE_LABEL: kai.leaf_queue_name(tenant)}
    labels = {admission.KUEUE_QUEUE_LABEL: kueue.LOCAL_QUEUE}
    if any(name == PRIORITY_CLASS for name, _, _ in profile.priority_classes):
        labels[KUEUE_PRIORITY_LABEL] = PRIORITY_CLASS
    return labels


def pod_labels(tenant: TenantSpec, endpoint: EndpointSpec, profile: ClusterProfile) -> dict[str, str]:
    return {
        COMPONENT: COMPONENT_VALUE,
        "app.kubernetes.io/name": "vllm",
        **selector(endpoint),
        **queue_labels(tenant, profile),
    }


def gpu_request(endpoint: EndpointSpec) -> dict[str, str]:
    """One replica's GPUs: units of the class's resource, and HAMi's memory and cores per unit."""
    units = endpoint.gpus_per_replica
    asks = {endpoint.resource_name: str(units)}
    asks.update({name: str(amount * units) for name, amount in endpoint.per_unit})
    return asks


def resources(endpoint: EndpointSpec, profile: ClusterProfile) -> dict[str, Any]:
    """Extended resources must be asked for with equal requests and limits. CPU and memory are limited at
    what is requested: a container without a limit would get the namespace LimitRange's default limit
    (`clusters.render.limitrange`, 2 CPUs), below the request, and the API server would refuse the pod."""
    gpus = gpu_request(endpoint)
    cpu_memory = {"cpu": profile.inference_cpu, "memory": profile.inference_memory}
    return {"requests": {**cpu_memory, **gpus}, "limits": {**cpu_memory, **gpus}}


def placement(tenant: TenantSpec, endpoint: EndpointSpec, profile: ClusterProfile) -> dict[str, Any]:
    """Node selector and tolerations: the class's nodes; an isolated tenant's own nodes only."""
    tolerations: list[dict[str, str]] = [dict(kueue.GPU_TOLERATION)]
    if tenant.trust_tier == "isolated":
        tolerations.append(
            {"key": DEDICATED_TO, "operator": "Equal", "value": tenant.slug, "effect": "NoSchedule"}
        )
    return {
        "nodeSelector": {**node_selector(tenant, profile), **dict(endpoint.node_labels)},
        "tolerations": tolerations,
    }


def model_argument(endpoint: EndpointSpec) -> tuple[str, list[str]]:
    """What `vllm serve` is given as the model, and the flags that go with it, by the source's scheme:
    a Hugging Face repository by its id (downloaded at start); an object store URI as it is, streamed by the
    Run:ai model streamer; a PersistentVolumeClaim's directory, mounted read-only under /models."""
    scheme, _, rest = endpoint.source_uri.partition("://")
    if scheme == "hf":
        return rest, ["--revision", endpoint.revision] if endpoint.revision else []
    if scheme == "pvc":
        _, _, path = rest.partition("/")
        return f"{MODELS_DIR}/{path}".rstrip("/"), []
    return endpoint.source_uri, ["--load-format", "runai_streamer"]


def parallelism(endpoint: EndpointSpec) -> list[str]:
    """`--tensor-parallel-size <GPUs>` unless the endpoint's own arguments set the parallelism (the
    service checked that they use exactly the replica's GPUs)."""
    flags = ("--tensor-parallel-size", "-tp", "--pipeline-parallel-size", "-pp")
    if any(arg.partition("=")[0] in flags for arg in endpoint.engine_args):
        return []
    return ["--tensor-parallel-size", str(endpoint.gpus_per_replica)]


def engine_arguments(endpoint: EndpointSpec) -> list[str]:
    """Everything after the model: the platform's flags (inference/rules.py says why they are its own),
    then the endpoint's."""
    args = ["--served-model-name", endpoint.served_model_name]
    if endpoint.context_length:
        args += ["--max-model-len", str(endpoint.context_length)]
    return args + parallelism(endpoint) + list(endpoint.engine_args)


def probe(path: str, period: int, failures: int) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": PORT}, "periodSeconds": period, "failureThreshold": failures}


def container(endpoint: EndpointSpec, profile: ClusterProfile, name: str, args: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "image": profile.inference_image,
        "args": args,
        "ports": [{"name": "http", "containerPort": PORT, "protocol": "TCP"}],
        "env": [
            {"name": "HOME", "value": CACHE_DIR},
            {"name": "HF_HOME", "value": f"{CACHE_DIR}/huggingface"},
            {"name": "VLLM_NO_USAGE_STATS", "value": "1"},
        ],
        "resources": resources(endpoint, profile),
        "securityContext": restricted_security_context() | {"runAsUser": RUN_AS, "runAsGroup": RUN_AS},
        "startupProbe": probe("/health", 10, STARTUP_MINUTES * 6),
        "readinessProbe": probe("/health", 5, 3),
        "livenessProbe": probe("/health", 10, 6),
        "volumeMounts": [{"name": "cache", "mountPath": CACHE_DIR}, {"name": "shm", "mountPath": "/dev/shm"}],
    }


def pod_spec(
    tenant: TenantSpec, endpoint: EndpointSpec, profile: ClusterProfile, main: dict[str, Any]
) -> dict[str, Any]:
    volumes: list[dict[str, Any]] = [
        {"name": "cache", "emptyDir": {}},
        {"name": "shm", "emptyDir": {"medium": "Memory"}},  # NCCL and vLLM's workers share memory here
    ]
    scheme, _, rest = endpoint.source_uri.partition("://")
    if scheme == "pvc":
        claim = rest.partition("/")[0]
        volumes.append({"name": "model", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}})
        main["volumeMounts"].append({"name": "model", "mountPath": MODELS_DIR, "readOnly": True})
    spec: dict[str, Any] = {
        "containers": [main],
        "volumes": volumes,
        "securityContext": {
            "runAsNonRoot": True,
            "fsGroup": RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "automountServiceAccountToken": False,  # the model server never calls the Kubernetes API
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 60,
        **placement(tenant, endpoint, profile),
    }
    if profile.scheduler == "kai":
        spec["schedulerName"] = kai.SCHEDULER_NAME
    return spec


def render_deployment(
    tenant: TenantSpec, endpoint: EndpointSpec, profile: ClusterProfile, replicas: int
) -> Manifest:
    """vLLM's OpenAI-compatible server. A rollout replaces a replica before starting the next
    (maxSurge 0): a surge replica would ask for GPUs beyond what the endpoint was admitted."""
    model, model_flags = model_argument(endpoint)
    main = container(
        endpoint, profile, "vllm", ["vllm", "serve", model, "--host", "0.0.0.0", "--port", str(PORT)]
    )
    main["command"] = main["args"][:2]
    main["args"] = main["args"][2:] + model_flags + engine_arguments(endpoint)
    labels = pod_labels(tenant, endpoint, profile)
    spec = {
        "replicas": replicas,
        "selector": {"matchLabels": selector(endpoint)},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
        "template": {"metadata": {"labels": labels}, "spec": pod_spec(tenant, endpoint, profile, main)},
    }
    deployment = obj(DEPLOYMENT_API, "Deployment", object_name(endpoint), tenant.namespace, spec=spec)
    deployment["metadata"]["labels"] = labels
    return owned(deployment, tenant.slug)


def render_service(tenant: TenantSpec, endpoint: EndpointSpec) -> Manifest:
    """The replicas behind one cluster address (in-cluster callers, metrics scraping); the gateway routes
    through the InferencePool instead."""
    spec = {
        "selector": selector(endpoint),
        "ports": [{"name": "http", "port": PORT, "targetPort": "http", "protocol": "TCP"}],
    }
    service = obj(SERVICE_API, "Service", object_name(endpoint), tenant.namespace, spec=spec)
    service["metadata"]["labels"] = {COMPONENT: COMPONENT_VALUE, **selector(endpoint)}
    return owned(service, tenant.slug)


def render_llm_inference_service(
    tenant: TenantSpec, endpoint: EndpointSpec, profile: ClusterProfile, replicas: int
) -> Manifest:
    """KServe's LLMInferenceService: KServe downloads `model.uri` (a Hugging Face revision as
    `hf://owner/model:revision`, its storage initializer's syntax) to /mnt/models and starts vLLM there with
    `--served-model-name` from `model.name`; the container's `args` are passed on to `vllm serve`."""
    uri = endpoint.source_uri
    if uri.startswith("hf://") and endpoint.revision:
        uri = f"{uri}:{endpoint.revision}"
    args = ["--max-model-len", str(endpoint.context_length)] if endpoint.context_length else []
    main = container(endpoint, profile, "main", args + list(endpoint.engine_args))
    spec: dict[str, Any] = {
        "model": {"uri": uri, "name": endpoint.served_model_name},
        "replicas": replicas,
        "labels": pod_labels(tenant, endpoint, profile),
        "template": pod_spec(tenant, endpoint, profile, main),
    }
    if parallelism(endpoint):
        spec["parallelism"] = {"tensor": endpoint.gpus_per_replica}
    service = obj(KSERVE_API, "LLMInferenceService", object_name(endpoint), tenant.namespace, spec=spec)
    return owned(service, tenant.slug)


# --- routing ---------------------------------------------------------------------------------------------


def render_pool(tenant: TenantSpec, endpoint: EndpointSpec) -> Manifest:
    """The endpoint's pods as one pool the Gateway balances over, through its endpoint picker."""
    spec = {
        "selector": {"matchLabels": selector(endpoint)},
        "targetPorts": [{"number": PORT}],
        "endpointPickerRef": {
            "kind": "Service",
            "name": picker_name(endpoint),
            "port": {"number": EPP_PORT},
            "failureMode": "FailClose",
        },
    }
    return owned(
        obj(POOL_API, "InferencePool", object_name(endpoint), tenant.namespace, spec=spec), tenant.slug
    )


def render_route(tenant: TenantSpec, endpoint: EndpointSpec, profile: ClusterProfile) -> Manifest:
    """The platform Gateway's route to the pool for requests the gateway marked for this endpoint."""
    gateway, gateway_namespace = profile.inference_gateway
    spec = {
        "parentRefs": [
            {
                "group": "gateway.networking.k8s.io",
                "kind": "Gateway",
                "name": gateway,
                "namespace": gateway_namespace,
            }
        ],
        "rules": [
            {
                "matches": [
                    {
                        "path": {"type": "PathPrefix", "value": "/v1/"},
                        "headers": [{"type": "Exact", "name": ROUTE_HEADER, "value": endpoint.public_id}],
                    }
                ],
                "backendRefs": [
                    {
                        "group": "inference.networking.k8s.io",
                        "kind": "InferencePool",
                        "name": object_name(endpoint),
                    }
                ],
            }
        ],
    }
    return owned(obj(ROUTE_API, "HTTPRoute", object_name(endpoint), tenant.namespace, spec=spec), tenant.slug)
