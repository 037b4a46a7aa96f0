"""What the renderers need to know about a host cluster, as plain values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

Scheduler = Literal["kueue", "kai"]
VClusterMode = Literal["helmrelease", "platform"]

# The Pod Security Standards levels (kubernetes.io/docs/concepts/security/pod-security-standards).
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")

DEFAULT_PRIORITY_CLASSES: tuple[tuple[str, int, str], ...] = (
    ("gpucloud-inference", 1000, "Serving: preempts training and batch"),
    ("gpucloud-training", 100, "Training: preempts batch"),
    ("gpucloud-batch", 10, "Batch: first to be preempted"),
)


@dataclass(frozen=True)
class OidcSettings:
    """The OpenID provider tenant API servers trust (docs/kubernetes.md, "Cluster access").

    Names from the token get `prefix`, so a person or group can never pass for a ServiceAccount or a
    built-in group (`system:…`).
    """

    issuer: str
    client_id: str
    username_claim: str = "sub"
    groups_claim: str = "groups"
    prefix: str = "oidc:"

    def api_server_args(self) -> list[str]:
        """The kube-apiserver flags of the vCluster's API server."""
        return [
            f"--oidc-issuer-url={self.issuer}",
            f"--oidc-client-id={self.client_id}",
            f"--oidc-username-claim={self.username_claim}",
            f"--oidc-username-prefix={self.prefix}",
            f"--oidc-groups-claim={self.groups_claim}",
            f"--oidc-groups-prefix={self.prefix}",
        ]


@dataclass(frozen=True)
class ClusterProfile:
    """How one host cluster is set up, as far as rendering tenant objects is concerned.

    `endpoint_base` is the URL under which tenant API servers are exposed: a tenant `acme` on
    `https://vc.example.com` is reached at `https://acme.vc.example.com`.
    """

    scheduler: Scheduler = "kueue"
    endpoint_base: str = "https://vc.example.com"
    cilium: bool = False
    vcluster_mode: VClusterMode = "helmrelease"
    topology_levels: tuple[str, ...] = ()  # node-label keys, outermost first (block, rack, …)
    # Topology-aware admission (clusters/render/topology.py): whether some GPU node carries NVIDIA's NVLink
    # domain label (nvidia.com/gpu.clique), and whether the cluster serves KAI's Topology
    # (kai.scheduler/v1alpha1).
    nvlink_domains: bool = False
    kai_topology: bool = False
    vcluster_chart_version: str = "0.37.0"
    vcluster_chart_repo: str = "https://charts.loft.sh"
    gpu_node_selector: tuple[tuple[str, str], ...] = (("nvidia.com/gpu.present", "true"),)
    sleep_after_inactivity: str = ""  # e.g. "2h"; empty = never sleep while running
    platform_project_namespace: str = "p-gpucloud"  # where VirtualClusterInstances live (platform mode)
    platform_cluster: str = ""  # the Platform's name for this host cluster (platform mode)
    priority_classes: tuple[tuple[str, int, str], ...] = DEFAULT_PRIORITY_CLASSES
    oidc: OidcSettings | None = None  # set when gpucloud has an OpenID provider
    dra: bool = (
        False  # serves resource.k8s.io/v1 and runs NVIDIA's DRA driver: DeviceClasses, claim templates
    )
    # Every GPU resource name the cluster's nodes advertise (nvidia.com/gpu, nvidia.com/mig-1g.18gb,
    # nvidia.com/gpu.shared, HAMi's nvidia.com/gpumem and nvidia.com/gpucores, …), whoever holds them: each
    # tenant's ResourceQuota and admission policy name all of them, 0 / refused where the tenant holds none.
    gpu_resources: tuple[str, ...] = ()
    # The admissionregistration.k8s.io version serving MutatingAdmissionPolicies ("v1", "v1beta1"; "" for
    # none): on a KAI cluster one gives every tenant pod its queue label and KAI's scheduler name.
    mutating_admission: str = ""
    # Pod Security Standard enforced per trust tier (host namespace label and the vCluster's own setting).
    pod_security: tuple[tuple[str, str], ...] = (
        ("isolated", "restricted"),
        ("standard", "baseline"),
        ("trusted", "baseline"),
    )
    # The host API server's own addresses (the `kubernetes` EndpointSlice in `default`, as discovered), as
    # CIDRs: tenant pods' egress never reaches them, even where they are public addresses.
    api_server_cidrs: tuple[str, ...] = ()
    # Trust tiers whose pods may open connections to the internet (public addresses); the others reach
    # DNS and their own namespace only.
    internet_egress: tuple[str, ...] = ("isolated", "standard", "trusted")
    # Inference endpoints (clusters/render/inference.py): whether the cluster serves the Gateway API's
    # HTTPRoute and the Inference Extension's InferencePool (without both, no endpoint is rendered), whether
    # KServe serves LLMInferenceService (then it runs the model servers instead of a Deployment), the
    # platform Gateway routes attach to (name, namespace), the vLLM image and a replica's
    # CPU and memory.
    inference: bool = False
    kserve: bool = False
    inference_gateway: tuple[str, str] = ("gpucloud-inference", "gpucloud-system")
    inference_image: str = "docker.io/vllm/vllm-openai:v0.10.2"
    inference_cpu: str = "4"
    inference_memory: str = "32Gi"

    def pod_security_level(self, tier: str) -> str:
        """The Pod Security Standard a tier's namespaces enforce; an unknown tier gets the strictest."""
        return dict(self.pod_security).get(tier, "restricted")

    def endpoint(self, slug: str) -> str:
        """The external URL of a tenant's API server."""
        parts = urlsplit(self.endpoint_base)
        scheme = parts.scheme or "https"
        host = parts.netloc or parts.path
        return f"{scheme}://{slug}.{host}"
