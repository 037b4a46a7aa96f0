"""The hostile-tenant suite: what a tenant's vCluster may and may not put on the host cluster.

A tenant owner is cluster-admin inside their vCluster; every pod they make reaches the host as a pod in
their host namespace. Each case below is such a host pod, judged by every layer that enforces something on
the host (`LAYERS`: one judge per layer in tests/judges/) against exactly what gpucloud renders, for tenants
of all three trust tiers, on a Kueue and on a KAI host cluster:

- every hostile pod is refused by at least one layer, and by each layer the case names (that is present)
  with a message containing the case's fragment;
- every ordinary GPU workload is admitted by every layer.

The stand-in API server has no admission, so this judges what would be enforced; the cluster suite
(tests/cluster/test_hostile_pods.py) sends the same pods to a real API server as server-side dry runs.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusters.render import Manifest, admission
from clusters.render.profile import ClusterProfile
from clusters.spec import QuotaSpec, TenantSpec
from tests.judges import admission as admission_judge
from tests.judges import pod_security as pod_security_judge
from tests.judges import quota as quota_judge
from tests.judges import scheduling as scheduling_judge
from tests.judges.world import World, world_of

Judge = Callable[[Manifest, World], list[str]]
# Every layer that enforces something on the host cluster, by its judge.
LAYERS: dict[str, Judge] = {
    "admission": admission_judge.judge,
    "quota": quota_judge.judge,
    "pod_security": pod_security_judge.judge,
    # Where the pod, as vCluster syncs it (its enforced node selector and tolerations), can be placed: a
    # pod no node takes is refused. A pod the scheduler would place on a node it must not is not "refused"
    # here; the suite asserts below that no pod every layer admits can reach such a node.
    "scheduling": lambda pod_, world: scheduling_judge.judge(scheduling_judge.synced(pod_, world), world),
}
SCHEDULERS = ("kueue", "kai")
TIERS = ("isolated", "standard", "trusted")
H200 = (("nvidia.com/gpu.product", "NVIDIA-H200"),)
GPU_RESOURCES = (
    "nvidia.com/gpu",
    "nvidia.com/gpu.shared",
    "nvidia.com/gpucores",
    "nvidia.com/gpumem",
    "nvidia.com/mig-1g.18gb",
    "nvidia.com/mig-3g.71gb",
)


def _quota(gpu_class: str, resource: str, units: int, **kwargs: Any) -> QuotaSpec:
    return QuotaSpec(gpu_class, resource, H200, units, 2, None, 1, **kwargs)


WHOLE = _quota("h200-141gb", "nvidia.com/gpu", 8)
MIG_1G = _quota("h200-141gb.mig-1g.18gb", "nvidia.com/mig-1g.18gb", 7)
SHARED = _quota("h200-141gb.shared", "nvidia.com/gpu.shared", 4)
HAMI = _quota(
    "h200-141gb.hami-25",
    "nvidia.com/gpu",
    4,
    per_unit=(("nvidia.com/gpumem", 36096), ("nvidia.com/gpucores", 25)),
)
TENANTS = (
    TenantSpec(
        "iso", "ten_iso", "isolated", "running", "tenant-iso", (WHOLE,), dedicated_nodes=("gpu-iso-1",)
    ),
    TenantSpec(
        "rival",
        "ten_rival",
        "isolated",
        "running",
        "tenant-rival",
        (WHOLE,),
        dedicated_nodes=("gpu-rival-1",),
    ),
    TenantSpec("std", "ten_std", "standard", "running", "tenant-std", (WHOLE, MIG_1G)),
    TenantSpec("trust", "ten_trust", "trusted", "running", "tenant-trust", (WHOLE, MIG_1G, SHARED, HAMI)),
)


def _node(
    name: str, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None
) -> Manifest:
    spec: dict[str, Any] = {"taints": taints or []}
    if any(t["key"] == "gpucloud.io/quarantine" for t in taints or []):
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"nvidia.com/gpu.present": "true", **dict(H200), **(labels or {})},
        },
        "spec": spec,
    }


def _dedicated(name: str, slug: str) -> Manifest:
    taint = {"key": "gpucloud.io/tenant", "value": slug, "effect": "NoSchedule"}
    return _node(name, {"gpucloud.io/tenant": slug}, [taint])


NODES = (
    _node("gpu-pool-1"),
    _dedicated("gpu-iso-1", "iso"),
    _dedicated("gpu-rival-1", "rival"),
    _node(  # quarantined: tainted and cordoned (the node lifecycle controller adds the unschedulable taint)
        "gpu-sick-1",
        taints=[
            {"key": "gpucloud.io/quarantine", "value": "xid-79", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
        ],
    ),
    _node(
        "gpu-mig-1",
        {"nvidia.com/mig.config.state": "pending"},
        [{"key": "gpucloud.io/mig-reconfigure", "value": "pending", "effect": "NoSchedule"}],
    ),
)


def make_world(scheduler: str) -> World:
    profile = ClusterProfile(scheduler=scheduler, gpu_resources=GPU_RESOURCES)  # type: ignore[arg-type]
    return world_of(profile, TENANTS, NODES)


WORLDS = {scheduler: make_world(scheduler) for scheduler in SCHEDULERS}


# --- pods as vCluster syncs them ------------------------------------------------------------------------


@dataclass(frozen=True)
class Ctx:
    """The tenant a pod is made for, on which host cluster, and another tenant with dedicated nodes."""

    tenant: TenantSpec
    scheduler: str
    tenants: tuple[TenantSpec, ...] = TENANTS  # every tenant on the host cluster

    @property
    def other(self) -> TenantSpec:
        return next(t for t in self.tenants if t.dedicated_nodes and t.slug != self.tenant.slug)


RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def container(name: str = "main", gpus: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """A container as a tenant writes it (securityContext fit for Pod Security restricted)."""
    resources: dict[str, Any] = {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "8Gi"}}
    for resource, amount in (gpus or {}).items():
        resources["requests"][resource] = amount
        resources["limits"][resource] = amount
    body = {
        "name": name,
        "image": "nvcr.io/nvidia/pytorch:25.01-py3",
        "resources": resources,
        "securityContext": copy.deepcopy(RESTRICTED_CONTAINER),
    }
    return body | extra


def pod(
    ctx: Ctx, name: str, *containers: dict[str, Any], labels: dict[str, str] | None = None, **spec: Any
) -> Manifest:
    """The host pod vCluster's syncer creates: in the tenant's host namespace, with its queue, scheduler and
    (isolated tenants) the toleration of its own dedicated nodes, as the other layers arrange them."""
    slug = ctx.tenant.slug
    pod_labels = {"vcluster.loft.sh/managed-by": slug, "vcluster.loft.sh/namespace": "default"}
    body: dict[str, Any] = {"containers": list(containers) or [container()], "restartPolicy": "Never"}
    if ctx.scheduler == "kueue":
        pod_labels[admission.KUEUE_QUEUE_LABEL] = "default"
    else:
        pod_labels[admission.KAI_QUEUE_LABEL] = ctx.tenant.namespace
        body["schedulerName"] = admission.KAI_SCHEDULER_NAME
    if ctx.tenant.trust_tier == "isolated":
        body["tolerations"] = [
            {"key": "gpucloud.io/tenant", "operator": "Equal", "value": slug, "effect": "NoSchedule"}
        ]
    body["securityContext"] = {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    pod_labels.update(labels or {})
    for key, value in spec.items():
        if key == "tolerations":
            body[key] = body.get(key, []) + value
        elif value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-x-default-x-{slug}",
            "namespace": ctx.tenant.namespace,
            "labels": pod_labels,
        },
        "spec": body,
    }


def gpu(n: int = 1) -> dict[str, str]:
    return {"nvidia.com/gpu": str(n)}


def unlabelled(manifest: Manifest, *keys: str) -> Manifest:
    for key in keys:
        manifest["metadata"]["labels"].pop(key, None)
    return manifest


def affinity(*expressions: dict[str, Any], preferred: bool = False) -> dict[str, Any]:
    if preferred:
        terms = [{"weight": 50, "preference": {"matchExpressions": list(expressions)}}]
        return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}
    required = {"nodeSelectorTerms": [{"matchExpressions": list(expressions)}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}


def capabilities(*add: str) -> dict[str, Any]:
    context = copy.deepcopy(RESTRICTED_CONTAINER)
    context["capabilities"]["add"] = list(add)
    return context


# --- the cases ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A pod, the tiers and schedulers it is judged for, and (hostile) who must refuse it with what."""

    name: str
    build: Callable[[Ctx], Manifest]
    refused_by: dict[str, str] = field(default_factory=dict)  # layer -> fragment of its message
    tiers: tuple[str, ...] = TIERS
    schedulers: tuple[str, ...] = SCHEDULERS


NOT_ALLOWED = "gpu-resource-not-allowed: container"
REACH = "reaches nodes tenant pods may not use"

HOSTILE = (
    Case(
        "a MIG profile an isolated tenant may not hold",
        lambda c: pod(c, "mig", container(gpus={"nvidia.com/mig-1g.18gb": "1"})),
        {
            "admission": f"{NOT_ALLOWED} main asks for nvidia.com/mig-1g.18gb",
            "quota": "nvidia.com/mig-1g.18gb",
        },
        tiers=("isolated",),
    ),
    Case(
        "a MIG profile nobody holds",
        lambda c: pod(c, "mig3g", container(gpus={"nvidia.com/mig-3g.71gb": "1"})),
        {
            "admission": f"{NOT_ALLOWED} main asks for nvidia.com/mig-3g.71gb",
            "quota": "nvidia.com/mig-3g.71gb",
        },
    ),
    Case(
        "a HAMi fraction on an isolated or standard tenant",
        lambda c: pod(
            c,
            "hami",
            container(
                gpus={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "36096", "nvidia.com/gpucores": "25"}
            ),
        ),
        {"admission": f"{NOT_ALLOWED} main asks for nvidia.com/gpu", "quota": "nvidia.com/gpumem"},
        tiers=("isolated", "standard"),
    ),
    Case(
        "a time-sliced GPU on an isolated or standard tenant",
        lambda c: pod(c, "shared", container(gpus={"nvidia.com/gpu.shared": "1"})),
        {"admission": "asks for nvidia.com/gpu.shared", "quota": "nvidia.com/gpu.shared"},
        tiers=("isolated", "standard"),
    ),
    Case(
        "a GPU resource the cluster does not offer",
        lambda c: pod(c, "b200", container(gpus={"nvidia.com/gpu-b200": "1"})),
        {"admission": "gpu-resource-not-offered: container main asks for nvidia.com/gpu-b200"},
    ),
    Case(
        "an init container asking for an unheld resource",
        lambda c: pod(
            c,
            "init",
            container(gpus=gpu()),
            initContainers=[container("warmup", gpus={"nvidia.com/mig-3g.71gb": "1"})],
        ),
        {"admission": f"{NOT_ALLOWED} warmup asks for nvidia.com/mig-3g.71gb"},
    ),
    Case(
        "a sidecar asking for an unheld resource",
        lambda c: pod(
            c,
            "sidecar",
            container(gpus=gpu()),
            container("cache", image="redis:7.4", gpus={"nvidia.com/mig-3g.71gb": "1"}),
        ),
        {"admission": f"{NOT_ALLOWED} cache asks for nvidia.com/mig-3g.71gb"},
    ),
    Case(
        "spec.nodeName set at creation",
        lambda c: pod(c, "pinned", container(gpus=gpu()), nodeName="gpu-pool-1"),
        {"admission": "node-name: spec.nodeName is set (gpu-pool-1)"},
    ),
    Case(
        "nodeName onto a quarantined node",
        lambda c: pod(c, "sick", container(gpus=gpu()), nodeName="gpu-sick-1"),
        {"admission": "node-name: spec.nodeName is set (gpu-sick-1)"},
    ),
    Case(
        "nodeName onto another tenant's dedicated node",
        lambda c: pod(c, "steal", container(gpus=gpu()), nodeName=c.other.dedicated_nodes[0]),
        {"admission": "node-name: spec.nodeName is set"},
    ),
    Case(
        "a node selector for another tenant's dedicated nodes",
        lambda c: pod(c, "sel", container(gpus=gpu()), nodeSelector={"gpucloud.io/tenant": c.other.slug}),
        {"admission": "node-selector: spec.nodeSelector gpucloud.io/tenant="},
    ),
    Case(
        "a node selector for nodes whose MIG layout is being changed",
        lambda c: pod(
            c, "migsel", container(gpus=gpu()), nodeSelector={"nvidia.com/mig.config.state": "pending"}
        ),
        {"admission": f"node-selector: spec.nodeSelector nvidia.com/mig.config.state=pending {REACH}"},
    ),
    Case(
        "a required affinity to another tenant's nodes",
        lambda c: pod(
            c,
            "aff",
            container(gpus=gpu()),
            affinity=affinity({"key": "gpucloud.io/tenant", "operator": "In", "values": [c.other.slug]}),
        ),
        {"admission": f"node-affinity: spec.affinity.nodeAffinity term gpucloud.io/tenant In {REACH}"},
    ),
    Case(
        "a required affinity to every dedicated node (Exists)",
        lambda c: pod(
            c,
            "affx",
            container(gpus=gpu()),
            affinity=affinity({"key": "gpucloud.io/tenant", "operator": "Exists"}),
        ),
        {"admission": "node-affinity: spec.affinity.nodeAffinity term gpucloud.io/tenant Exists"},
    ),
    Case(
        "a required affinity to every node but one's own (NotIn)",
        lambda c: pod(
            c,
            "affn",
            container(gpus=gpu()),
            affinity=affinity({"key": "gpucloud.io/tenant", "operator": "NotIn", "values": [c.tenant.slug]}),
        ),
        {"admission": "node-affinity: spec.affinity.nodeAffinity term gpucloud.io/tenant NotIn"},
    ),
    Case(
        "a preferred affinity to another tenant's node",
        lambda c: pod(
            c,
            "pref",
            container(gpus=gpu()),
            affinity=affinity(
                {"key": "gpucloud.io/tenant", "operator": "In", "values": [c.other.slug]}, preferred=True
            ),
        ),
        {"admission": "node-affinity: spec.affinity.nodeAffinity term gpucloud.io/tenant In"},
    ),
    Case(
        "an affinity to quarantined nodes",
        lambda c: pod(
            c,
            "affq",
            container(gpus=gpu()),
            affinity=affinity({"key": "gpucloud.io/quarantine", "operator": "Exists"}),
        ),
        {"admission": "node-affinity: spec.affinity.nodeAffinity term gpucloud.io/quarantine Exists"},
    ),
    Case(
        "a toleration for another tenant's taint",
        lambda c: pod(
            c,
            "tol",
            container(gpus=gpu()),
            tolerations=[
                {
                    "key": "gpucloud.io/tenant",
                    "operator": "Equal",
                    "value": c.other.slug,
                    "effect": "NoSchedule",
                }
            ],
        ),
        {"admission": f"toleration: spec.tolerations tolerates gpucloud.io/tenant Equal {REACH}"},
    ),
    Case(
        "a toleration of every tenant's taint (Exists on the key)",
        lambda c: pod(
            c,
            "tolx",
            container(gpus=gpu()),
            tolerations=[{"key": "gpucloud.io/tenant", "operator": "Exists"}],
        ),
        {"admission": "toleration: spec.tolerations tolerates gpucloud.io/tenant Exists"},
    ),
    Case(
        "an everything-toleration",
        lambda c: pod(c, "tolall", container(gpus=gpu()), tolerations=[{"operator": "Exists"}]),
        {"admission": "toleration: spec.tolerations tolerates <any key> Exists"},
    ),
    Case(
        "an everything-toleration for one effect",
        lambda c: pod(
            c, "tolns", container(gpus=gpu()), tolerations=[{"operator": "Exists", "effect": "NoSchedule"}]
        ),
        {"admission": "toleration: spec.tolerations tolerates <any key> Exists"},
    ),
    Case(
        "a toleration of the quarantine taint",
        lambda c: pod(
            c,
            "tolq",
            container(gpus=gpu()),
            tolerations=[{"key": "gpucloud.io/quarantine", "operator": "Exists", "effect": "NoSchedule"}],
        ),
        {"admission": "toleration: spec.tolerations tolerates gpucloud.io/quarantine Exists"},
    ),
    Case(
        "a toleration of a cordoned node",
        lambda c: pod(
            c,
            "tolc",
            container(gpus=gpu()),
            tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}],
        ),
        {"admission": "toleration: spec.tolerations tolerates node.kubernetes.io/unschedulable Exists"},
    ),
    Case(
        "a toleration of a node being reconfigured",
        lambda c: pod(
            c,
            "tolm",
            container(gpus=gpu()),
            tolerations=[{"key": "gpucloud.io/mig-reconfigure", "operator": "Equal", "value": "pending"}],
        ),
        {"admission": "toleration: spec.tolerations tolerates gpucloud.io/mig-reconfigure Equal"},
    ),
    Case(
        "hostNetwork",
        lambda c: pod(c, "hostnet", container(gpus=gpu()), hostNetwork=True),
        {"admission": "host-network: spec.hostNetwork is true", "pod_security": "host namespaces"},
    ),
    Case(
        "hostPID",
        lambda c: pod(c, "hostpid", container(), hostPID=True),
        {"admission": "host-pid: spec.hostPID is true", "pod_security": "host namespaces"},
    ),
    Case(
        "hostIPC",
        lambda c: pod(c, "hostipc", container(), hostIPC=True),
        {"admission": "host-ipc: spec.hostIPC is true", "pod_security": "host namespaces"},
    ),
    Case(
        "a hostPath volume",
        lambda c: pod(
            c,
            "hostpath",
            container(gpus=gpu(), volumeMounts=[{"name": "root", "mountPath": "/host"}]),
            volumes=[{"name": "root", "hostPath": {"path": "/"}}],
        ),
        {"admission": "host-path: volume root mounts host path /", "pod_security": "hostPath"},
    ),
    Case(
        "a privileged container",
        lambda c: pod(c, "priv", container(gpus=gpu(), securityContext={"privileged": True})),
        {
            "admission": "privileged: container main sets securityContext.privileged",
            "pod_security": "privileged",
        },
    ),
    Case(
        "privileged and hostPath together",
        lambda c: pod(
            c,
            "escape",
            container(
                securityContext={"privileged": True}, volumeMounts=[{"name": "dev", "mountPath": "/dev"}]
            ),
            volumes=[{"name": "dev", "hostPath": {"path": "/dev"}}],
        ),
        {"admission": "privileged: container main", "pod_security": "privileged"},
    ),
    Case(
        "a privileged init container",
        lambda c: pod(
            c,
            "privinit",
            container(gpus=gpu()),
            initContainers=[container("setup", securityContext={"privileged": True})],
        ),
        {"admission": "privileged: container setup sets securityContext.privileged"},
    ),
    Case(
        "CAP_SYS_ADMIN",
        lambda c: pod(
            c, "sysadmin", container(gpus=gpu(), securityContext={"capabilities": {"add": ["SYS_ADMIN"]}})
        ),
        {
            "admission": "capabilities: container main adds capability SYS_ADMIN",
            "pod_security": "capabilities",
        },
    ),
    Case(
        "a baseline capability where the tier is restricted",
        lambda c: pod(c, "chown", container(gpus=gpu(), securityContext=capabilities("CHOWN"))),
        {"admission": "capabilities: container main adds capability CHOWN beyond Pod Security restricted"},
        tiers=("isolated",),
    ),
    Case(
        "a pod without a queue label",
        lambda c: unlabelled(pod(c, "noqueue", container(gpus=gpu())), admission.KUEUE_QUEUE_LABEL),
        {"admission": "queue: label kueue.x-k8s.io/queue-name is <none>"},
        schedulers=("kueue",),
    ),
    Case(
        "a pod naming another LocalQueue",
        lambda c: pod(
            c, "otherq", container(gpus=gpu()), labels={admission.KUEUE_QUEUE_LABEL: c.other.namespace}
        ),
        {"admission": "queue: label kueue.x-k8s.io/queue-name is tenant-"},
        schedulers=("kueue",),
    ),
    Case(
        "a pod without a KAI queue",
        lambda c: unlabelled(pod(c, "nokai", container(gpus=gpu())), admission.KAI_QUEUE_LABEL),
        {"admission": "queue: label kai.scheduler/queue is <none>"},
        schedulers=("kai",),
    ),
    Case(
        "a pod naming another tenant's KAI queue",
        lambda c: pod(
            c, "otherkai", container(gpus=gpu()), labels={admission.KAI_QUEUE_LABEL: c.other.namespace}
        ),
        {"admission": "queue: label kai.scheduler/queue is tenant-"},
        schedulers=("kai",),
    ),
    Case(
        "a pod for the default scheduler on a KAI cluster",
        lambda c: pod(c, "defsched", container(gpus=gpu()), schedulerName=None),
        {"admission": "scheduler-name: spec.schedulerName is <default-scheduler>"},
        schedulers=("kai",),
    ),
    Case(
        "a pod for another scheduler on a KAI cluster",
        lambda c: pod(c, "hamisched", container(gpus=gpu()), schedulerName="hami-scheduler"),
        {"admission": "scheduler-name: spec.schedulerName is hami-scheduler"},
        schedulers=("kai",),
    ),
    Case(
        "nodeName, an everything-toleration and hostNetwork together",
        lambda c: pod(
            c,
            "all",
            container(gpus=gpu()),
            nodeName="gpu-rival-1",
            tolerations=[{"operator": "Exists"}],
            hostNetwork=True,
        ),
        {"admission": "node-name:"},
    ),
)


ORDINARY = (
    Case(
        "a PyTorch Job worker",
        lambda c: pod(
            c,
            "train-worker-0",
            container("pytorch", gpus=gpu(2), env=[{"name": "MASTER_ADDR", "value": "train-master-0"}]),
            labels={
                "training.kubeflow.org/job-name": "train",
                "training.kubeflow.org/replica-type": "worker",
            },
        ),
    ),
    Case(
        "a PyTorch Job master",
        lambda c: pod(
            c,
            "train-master-0",
            container("pytorch", gpus=gpu(2), ports=[{"containerPort": 23456, "name": "pytorchjob-port"}]),
            labels={
                "training.kubeflow.org/job-name": "train",
                "training.kubeflow.org/replica-type": "master",
            },
        ),
    ),
    Case(
        "a JobSet pod",
        lambda c: pod(
            c,
            "llm-workers-0-0",
            container(gpus=gpu(1)),
            labels={"jobset.sigs.k8s.io/jobset-name": "llm", "kueue.x-k8s.io/pod-group-name": "llm"}
            if c.scheduler == "kueue"
            else {"jobset.sigs.k8s.io/jobset-name": "llm"},
            subdomain="llm",
        ),
    ),
    Case(
        "a vLLM Deployment pod with a MIG slice",
        lambda c: pod(
            c,
            "vllm-7d9f",
            container(
                "vllm",
                gpus={"nvidia.com/mig-1g.18gb": "1"},
                image="vllm/vllm-openai:v0.8.0",
                args=["--model", "Qwen/Qwen2.5-1.5B-Instruct"],
                ports=[{"containerPort": 8000}],
                readinessProbe={"httpGet": {"path": "/health", "port": 8000}},
            ),
            labels={"app": "vllm"},
            restartPolicy="Always",
        ),
        tiers=("standard", "trusted"),
    ),
    Case(
        "a vLLM pod on a whole GPU",
        lambda c: pod(
            c,
            "vllm-whole",
            container(
                "vllm",
                gpus=gpu(),
                image="vllm/vllm-openai:v0.8.0",
                volumeMounts=[{"name": "shm", "mountPath": "/dev/shm"}],
            ),
            volumes=[{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}],
            restartPolicy="Always",
        ),
    ),
    Case(
        "a notebook",
        lambda c: pod(
            c,
            "notebook-0",
            container(
                "notebook",
                gpus=gpu(),
                image="quay.io/jupyter/pytorch-notebook:cuda12-latest",
                workingDir="/home/jovyan",
            ),
            volumes=[{"name": "work", "persistentVolumeClaim": {"claimName": "notebook-work"}}],
            restartPolicy="Always",
        ),
    ),
    Case(
        "a HAMi fraction for a trusted tenant",
        lambda c: pod(
            c,
            "hami-infer",
            container(
                gpus={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "36096", "nvidia.com/gpucores": "25"}
            ),
        ),
        tiers=("trusted",),
    ),
    Case(
        "a time-sliced GPU for a trusted tenant",
        lambda c: pod(c, "shared-dev", container(gpus={"nvidia.com/gpu.shared": "1"})),
        tiers=("trusted",),
    ),
    Case(
        "a MIG slice for a standard tenant",
        lambda c: pod(c, "mig-batch", container(gpus={"nvidia.com/mig-1g.18gb": "2"})),
        tiers=("standard", "trusted"),
    ),
    Case("a CPU-only pod", lambda c: pod(c, "prep", container("prep", image="python:3.12-slim"))),
    Case(
        "a CPU-only pod with a sidecar",
        lambda c: pod(
            c,
            "etl",
            container("etl", image="python:3.12-slim"),
            container("fluent-bit", image="fluent/fluent-bit:3.2"),
            volumes=[{"name": "logs", "emptyDir": {}}],
        ),
    ),
    Case(
        "a GPU pod with a CPU init container downloading weights",
        lambda c: pod(
            c,
            "weights",
            container(gpus=gpu()),
            initContainers=[
                container("download", image="amazon/aws-cli:2.22.0", args=["s3", "sync", "s3://m", "/m"])
            ],
        ),
    ),
    Case(
        "a GPU pod selecting a GPU model",
        lambda c: pod(
            c, "h200-only", container(gpus=gpu()), nodeSelector={"nvidia.com/gpu.product": "NVIDIA-H200"}
        ),
    ),
    Case(
        "a GPU pod tolerating the GPU taint and node problems",
        lambda c: pod(
            c,
            "tolerant",
            container(gpus=gpu()),
            tolerations=[
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
        ),
    ),
    Case(
        "a pod with an affinity to its own dedicated nodes",
        lambda c: pod(
            c,
            "own-nodes",
            container(gpus=gpu()),
            affinity=affinity({"key": "gpucloud.io/tenant", "operator": "In", "values": [c.tenant.slug]}),
            tolerations=[{"key": "gpucloud.io/tenant", "operator": "Equal", "value": c.tenant.slug}],
        ),
        tiers=("isolated",),
    ),
    Case(
        "a pod keeping off dedicated nodes",
        lambda c: pod(
            c,
            "pool-only",
            container(gpus=gpu()),
            affinity=affinity({"key": "gpucloud.io/tenant", "operator": "DoesNotExist"}, preferred=True),
        ),
        tiers=("standard", "trusted"),
    ),
    Case(
        "a server binding a low port",
        lambda c: pod(
            c,
            "web",
            container(
                "web",
                image="nginxinc/nginx-unprivileged:1.27",
                securityContext=capabilities("NET_BIND_SERVICE"),
            ),
        ),
    ),
    Case(
        "a baseline capability where the tier is baseline",
        lambda c: pod(
            c,
            "chown",
            container(
                gpus=gpu(),
                securityContext={"allowPrivilegeEscalation": False, "capabilities": {"add": ["CHOWN"]}},
            ),
        ),
        tiers=("standard", "trusted"),
    ),
    Case(
        "a multi-GPU pod with a metrics sidecar",
        lambda c: pod(
            c,
            "ddp",
            container(gpus=gpu(4)),
            container("metrics", image="prom/node-exporter:v1.8.2", ports=[{"containerPort": 9100}]),
        ),
    ),
)


def _runs(cases: tuple[Case, ...]) -> list[Any]:
    return [
        pytest.param(case, scheduler, tier, id=f"{case.name}-{scheduler}-{tier}")
        for case in cases
        for scheduler in case.schedulers
        for tier in case.tiers
        if set(case.refused_by) & set(LAYERS) or not case.refused_by
    ]


def _judge_all(pod_: Manifest, world: World) -> dict[str, list[str]]:
    return {layer: judge(pod_, world) for layer, judge in LAYERS.items()}


def _ctx(scheduler: str, tier: str) -> Ctx:
    return Ctx(tenant_of_tier(TENANTS, tier), scheduler)


def tenant_of_tier(tenants: tuple[TenantSpec, ...], tier: str) -> TenantSpec:
    """The first tenant of a tier (for tenants made like TENANTS: one isolated tenant per run comes first)."""
    return next(t for t in tenants if t.trust_tier == tier)


@pytest.mark.parametrize(("case", "scheduler", "tier"), _runs(HOSTILE))
def test_a_hostile_pod_is_refused(case: Case, scheduler: str, tier: str) -> None:
    hostile = case.build(_ctx(scheduler, tier))
    refusals = _judge_all(hostile, WORLDS[scheduler])
    assert any(refusals.values()), f"{case.name}: admitted by every layer ({', '.join(LAYERS)})"
    for layer, fragment in case.refused_by.items():
        if layer in LAYERS:
            assert any(fragment in message for message in refusals[layer]), (layer, fragment, refusals[layer])


@pytest.mark.parametrize(("case", "scheduler", "tier"), _runs(ORDINARY))
def test_an_ordinary_gpu_workload_is_admitted_by_every_layer(case: Case, scheduler: str, tier: str) -> None:
    ordinary = case.build(_ctx(scheduler, tier))
    assert _judge_all(ordinary, WORLDS[scheduler]) == {layer: [] for layer in LAYERS}


@pytest.mark.parametrize(("case", "scheduler", "tier"), _runs(HOSTILE) + _runs(ORDINARY))
def test_no_pod_every_layer_admits_can_reach_a_node_it_must_not(
    case: Case, scheduler: str, tier: str
) -> None:
    """Another tenant's dedicated node, a quarantined node or one being reconfigured: a pod that reaches one
    must have been refused by some layer (admission refuses nodeName and the tolerations and selectors that
    would get it there)."""
    world = WORLDS[scheduler]
    candidate = case.build(_ctx(scheduler, tier))
    if any(_judge_all(candidate, world).values()):
        return
    assert scheduling_judge.breaches(scheduling_judge.synced(candidate, world), world) == []


def test_the_suite_has_the_cases_the_issue_asks_for() -> None:
    judged = {case.name for case in HOSTILE if set(case.refused_by) & set(LAYERS)}
    assert len(judged) >= 30
    assert len(ORDINARY) >= 15
    for tier in TIERS:
        assert sum(tier in case.tiers for case in ORDINARY) >= 12
    rules = {admission_judge.rule_of(m) for case in HOSTILE for m in _all_refusals(case)}
    assert rules >= {
        "gpu-resource-not-offered", "gpu-resource-not-allowed", "node-name", "node-selector", "node-affinity",
        "toleration", "host-network", "host-pid", "host-ipc", "host-path", "privileged", "capabilities",
        "queue", "scheduler-name",
    }  # fmt: skip


def _all_refusals(case: Case) -> list[str]:
    return [
        message
        for scheduler in case.schedulers
        for tier in case.tiers
        for message in admission_judge.judge(case.build(_ctx(scheduler, tier)), WORLDS[scheduler])
    ]


# --- the admission layer's own semantics ----------------------------------------------------------------


def test_a_namespace_without_its_params_refuses_every_pod() -> None:
    world = WORLDS["kueue"]
    without = [
        o
        for o in world.rendered
        if not (o["kind"] == "ConfigMap" and o["metadata"]["namespace"] == "tenant-std")
    ]
    broken = World(world.profile, world.tenants, tuple(without))
    refusals = admission_judge.judge(pod(_ctx("kueue", "standard"), "prep", container()), broken)
    assert refusals == [
        "ValidatingAdmissionPolicy 'gpucloud-pods-standard' with binding 'gpucloud-pods-standard' denied "
        "request: no params found for policy binding with `Deny` parameterNotFoundAction"
    ]


def test_each_tier_is_judged_by_its_own_policy() -> None:
    for tier in TIERS:
        refusals = admission_judge.judge(
            pod(_ctx("kai", tier), "x", container(), hostPID=True), WORLDS["kai"]
        )
        assert [m.split("'")[1] for m in refusals] == [f"gpucloud-pods-{tier}"]


def test_a_namespace_gpucloud_does_not_manage_is_not_judged() -> None:
    world = WORLDS["kueue"]
    rendered = copy.deepcopy(list(world.rendered))
    ns = next(o for o in rendered if o["kind"] == "Namespace" and o["metadata"]["name"] == "tenant-std")
    del ns["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    hostile = pod(_ctx("kueue", "standard"), "x", container(), hostNetwork=True)
    assert admission_judge.judge(hostile, World(world.profile, world.tenants, tuple(rendered))) == []
    assert admission_judge.judge(hostile, world) != []


def test_an_update_may_keep_the_node_it_was_bound_to_but_not_add_a_toleration() -> None:
    world = WORLDS["kueue"]
    ctx = _ctx("kueue", "standard")
    bound = pod(ctx, "bound", container(gpus=gpu()), nodeName="gpu-pool-1")
    update = admission_judge.Request(operation="UPDATE")
    assert admission_judge.review(bound, world, update, old=bound) == []
    tolerant = pod(
        ctx, "bound", container(gpus=gpu()), nodeName="gpu-pool-1", tolerations=[{"operator": "Exists"}]
    )
    [refusal] = admission_judge.review(tolerant, world, update, old=bound)
    assert admission_judge.rule_of(refusal) == "toleration"


def test_an_ephemeral_container_is_judged_like_the_others() -> None:
    world = WORLDS["kai"]
    ctx = _ctx("kai", "trusted")
    running = pod(ctx, "debug", container())
    debugged = copy.deepcopy(running)
    debugged["spec"]["ephemeralContainers"] = [
        {"name": "shell", "image": "busybox", "securityContext": {"privileged": True}}
    ]
    request = admission_judge.Request(operation="UPDATE", sub_resource="ephemeralcontainers")
    [refusal] = admission_judge.review(debugged, world, request, old=running)
    assert "privileged: container shell" in refusal


def test_the_host_clusters_own_controllers_are_not_judged_but_the_syncer_is() -> None:
    world = WORLDS["kueue"]
    control_plane = unlabelled(
        pod(_ctx("kueue", "standard"), "std-0", container()), admission.KUEUE_QUEUE_LABEL
    )
    statefulset = admission_judge.Request(username="system:serviceaccount:kube-system:statefulset-controller")
    assert admission_judge.review(control_plane, world, statefulset) == []
    assert admission_judge.rule_of(admission_judge.judge(control_plane, world)[0]) == "queue"


def test_an_update_touching_neither_spec_nor_labels_is_not_judged_again() -> None:
    """A pod from before the policy, Kueue removing its finalizer: refusing it would leave the pod stuck."""
    world = WORLDS["kueue"]
    before = pod(_ctx("kueue", "isolated"), "old", container(), hostIPC=True)
    before["metadata"]["finalizers"] = ["kueue.x-k8s.io/managed"]
    after = copy.deepcopy(before)
    after["metadata"]["finalizers"] = []
    update = admission_judge.Request(operation="UPDATE")
    assert admission_judge.review(after, world, update, old=before) == []
    relabelled = copy.deepcopy(after)
    relabelled["metadata"]["labels"][admission.KUEUE_QUEUE_LABEL] = "elsewhere"
    rules = {
        admission_judge.rule_of(m) for m in admission_judge.review(relabelled, world, update, old=before)
    }
    assert rules == {"host-ipc", "queue"}


def test_binding_a_pod_to_a_node_is_not_a_pod_create() -> None:
    """The scheduler binds through pods/binding, which the policies do not match: the node it picks is not
    the tenant's choice."""
    world = WORLDS["kai"]
    bound = pod(_ctx("kai", "standard"), "bound", container(gpus=gpu()), nodeName="gpu-pool-1")
    binding = admission_judge.Request(operation="CREATE", sub_resource="binding")
    assert admission_judge.review(bound, world, binding) == []
    assert admission_judge.rule_of(admission_judge.judge(bound, world)[0]) == "node-name"


def _tolerates(toleration: dict[str, str], taint: dict[str, str]) -> bool:
    """Kubernetes' Toleration.ToleratesTaint (k8s.io/api/core/v1/toleration.go), written out again."""
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    if toleration.get("key") and toleration["key"] != taint["key"]:
        return False
    if toleration.get("operator") == "Exists":
        return True
    return toleration.get("value", "") == taint.get("value", "")


_TOLERATION_KEYS = ["", "gpucloud.io/tenant", "gpucloud.io/quarantine", "gpucloud.io/mig-reconfigure"]
_TOLERATION_KEYS += ["node.kubernetes.io/unschedulable", "nvidia.com/gpu", "example.com/team"]


@st.composite
def _toleration(draw: st.DrawFn) -> dict[str, str]:
    key = draw(st.sampled_from(_TOLERATION_KEYS))
    toleration = {"key": key} if key else {}
    if not key or draw(st.booleans()):
        toleration["operator"] = "Exists"
    else:
        values = ["iso", "rival"] if key == "gpucloud.io/tenant" else ["xid-79", "pending", "", "a"]
        toleration |= {"operator": "Equal", "value": draw(st.sampled_from(values))}
    effect = draw(st.sampled_from(["", "NoSchedule", "NoExecute"]))
    return toleration | ({"effect": effect} if effect else {})


@settings(max_examples=150, deadline=None)
@given(tier=st.sampled_from(TIERS), tolerations=st.lists(_toleration(), max_size=3))
def test_the_toleration_rule_refuses_exactly_what_tolerates_a_taint_the_tenant_may_not_reach(
    tier: str, tolerations: list[dict[str, str]]
) -> None:
    """Against the world's nodes and Kubernetes' own toleration semantics: a pod is refused when one of its
    tolerations tolerates a taint of a node it may not reach (another tenant's, quarantined, cordoned, being
    reconfigured). Stricter by design: gpucloud's own keys whatever the effect or value, and an empty-key
    Exists for any effect (it would tolerate whatever taint comes next)."""
    ctx = _ctx("kueue", tier)
    own = {"key": "gpucloud.io/tenant", "value": ctx.tenant.slug, "effect": "NoSchedule"}
    forbidden = [t for node in NODES for t in node["spec"]["taints"] if t != own]
    reserved = set(admission.RESERVED_TAINT_KEYS)
    refused = any(
        any(_tolerates(t, taint) for taint in forbidden)
        or t.get("key") in reserved
        or (not t.get("key") and t.get("operator") == "Exists")
        or (
            t.get("key") == "gpucloud.io/tenant"
            and (t.get("operator") == "Exists" or t["value"] != ctx.tenant.slug)
        )
        for t in tolerations
    )
    toleration_refusals = [
        m
        for m in admission_judge.judge(pod(ctx, "p", container(), tolerations=tolerations), WORLDS["kueue"])
        if admission_judge.rule_of(m) == "toleration"
    ]
    assert bool(toleration_refusals) == refused, (tolerations, toleration_refusals)
