"""The tenant's vCluster: a Flux HelmRelease of the `vcluster` chart, or a vCluster Platform instance."""

from __future__ import annotations

from typing import Any

import yaml

from clusters.spec import TenantSpec
from gpucloud.kube.meta import DEDICATED_TO, Manifest, obj, owned

from . import dra
from .profile import ClusterProfile

REPOSITORY = "loft"
# How long a suspended vCluster stays awake after its last request: its workloads are put to sleep,
# which deletes the synced pods on the host and releases their GPUs.
SUSPENDED_SLEEP_AFTER = "1m"
# The user the control plane and its CoreDNS run as where the namespace enforces `restricted` (any non-zero
# uid does; vCluster's docs use this one for non-root control planes).
NON_ROOT_UID = 12345


def vcluster_name(tenant: TenantSpec) -> str:
    """The vCluster (and Helm release) name; its kubeconfig secret is `vc-<name>`."""
    return tenant.slug


def render_values(tenant: TenantSpec, profile: ClusterProfile) -> dict[str, Any]:
    """vcluster.yaml for a GPU tenant whose pods the host scheduler (Kueue or KAI) places."""
    values: dict[str, Any] = {
        "sync": {
            "toHost": {"pods": render_pods(tenant)},
            "fromHost": {
                "nodes": {"enabled": True, "selector": {"labels": node_selector(tenant, profile)}},
                "runtimeClasses": {"enabled": True},
            },
        },
        # gpucloud renders the host ResourceQuota and LimitRange itself.
        "policies": {"resourceQuota": {"enabled": False}, "limitRange": {"enabled": False}},
        "controlPlane": {"advanced": {"virtualScheduler": {"enabled": False}}},
        "exportKubeConfig": {"server": profile.endpoint(tenant.slug)},
        # The vCluster's CoreDNS forwards what it cannot answer to the host cluster's DNS (the service address
        # in the control plane's resolv.conf) instead of the node's resolvers: those are link-local or private
        # on most clouds (169.254.169.254 on GKE, 169.254.169.253 or the VPC's .2 on AWS), which the tenant's
        # egress policy denies, while the host's `kube-dns` pods are allowed (render/networkpolicy.py).
        "networking": {"advanced": {"fallbackHostCluster": True}},
    }
    if profile.scheduler == "kai":
        # KAI's pod-grouper walks owner references, which vCluster would point at its own Service.
        values["experimental"] = {"syncSettings": {"setOwner": False}}
    if profile.dra:
        render_dra(values, tenant)
    if profile.oidc is not None:
        # The API server trusts gpucloud's provider: people reach it with their own tokens (kubelogin).
        values["controlPlane"]["distro"] = {
            "k8s": {"enabled": True, "apiServer": {"extraArgs": profile.oidc.api_server_args()}}
        }
    render_pod_security(values, tenant, profile)
    values.update(render_sleep(tenant, profile))
    return values


def render_dra(values: dict[str, Any], tenant: TenantSpec) -> None:
    """DRA from inside the tenant (docs/kubernetes.md, "DRA inside the tenant's vCluster"), on host
    clusters that serve it. Keys per the chart's values.schema.json (clusters/tests/render/vcluster/); in
    vCluster's own code these syncs are Pro features (`config.Config.IsProFeatureEnabled`), as sleep is.

    - claims and claim templates made inside sync to the tenant's host namespace, where the scheduler
      allocates devices to the claims and the ResourceQuota counts them per DeviceClass;
    - DeviceClasses sync from the host, only those labelled with a class the tenant holds (the selector
      is a label selector: `gpucloud.io/gpu-class` In its classes); none when it holds none;
    - vCluster applies one claim template per class inside (namespace `default`): claim templates do not
      sync from the host, and gpucloud keeps no per-tenant object pass inside the vCluster but RBAC's.
    """
    to_host = values["sync"]["toHost"]
    to_host["resourceClaims"] = {"enabled": True}
    to_host["resourceClaimTemplates"] = {"enabled": True}
    classes = [dra.class_label(name) for name in dra.classes_of(tenant)]
    if not classes:
        return
    selector = {"matchExpressions": [{"key": dra.GPU_CLASS, "operator": "In", "values": classes}]}
    values["sync"]["fromHost"]["deviceClasses"] = {"enabled": True, "selector": selector}
    deploy = {"vcluster": {"manifests": dra.template_manifests(tenant)}}
    values.setdefault("experimental", {})["deploy"] = deploy


def render_pod_security(values: dict[str, Any], tenant: TenantSpec, profile: ClusterProfile) -> None:
    """The vCluster enforces its tier's Pod Security Standard inside (it labels its own namespaces, so a
    pod is refused by the tenant's API server before it is synced), and under `restricted` its own pods
    (control plane, CoreDNS), which run in the host namespace that enforces the same level, comply."""
    level = profile.pod_security_level(tenant.trust_tier)
    values["policies"]["podSecurityStandard"] = level
    if level != "restricted":
        return  # the chart's defaults (root, no seccomp profile) pass baseline
    container = restricted_security_context()
    pod: dict[str, Any] = {
        "runAsNonRoot": True,
        "runAsUser": NON_ROOT_UID,
        "runAsGroup": NON_ROOT_UID,
        "fsGroup": NON_ROOT_UID,
    }
    pod["seccompProfile"] = {"type": "RuntimeDefault"}
    security = {"podSecurityContext": pod, "containerSecurityContext": container}
    values["controlPlane"]["statefulSet"] = {"security": security}
    values["controlPlane"]["coredns"] = {"security": security}
    distro = values["controlPlane"].setdefault("distro", {}).setdefault("k8s", {})
    distro["securityContext"] = container  # the init container that copies the Kubernetes binaries


def restricted_security_context() -> dict[str, Any]:
    """A container security context that passes the `restricted` Pod Security Standard."""
    return {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "runAsUser": NON_ROOT_UID,
        "runAsGroup": NON_ROOT_UID,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def node_selector(tenant: TenantSpec, profile: ClusterProfile) -> dict[str, str]:
    """The host nodes the vCluster syncs. vCluster's pod syncer also sets these labels as the node selector
    of every pod it syncs without a `nodeName` (loft-sh/vcluster pkg/controllers/resources/pods/syncer.go,
    "ensure node selector"; a pod with a `nodeName` must name a synced node), so an isolated tenant's pods
    land only on the nodes dedicated to it (docs/kubernetes.md, "Dedicated nodes")."""
    labels = dict(profile.gpu_node_selector)
    if tenant.trust_tier == "isolated":
        labels[DEDICATED_TO] = tenant.slug
    return labels


def toleration(slug: str) -> str:
    """The toleration of the taint `gpucloud.io/tenant=<slug>:NoSchedule` in vCluster's
    `enforceTolerations` syntax, `key=value:Effect` (operator Equal; parsed by loft-sh/vcluster
    pkg/util/toleration/toleration.go)."""
    return f"{DEDICATED_TO}={slug}:NoSchedule"


def render_pods(tenant: TenantSpec) -> dict[str, Any]:
    """`sync.toHost.pods`: an isolated tenant's synced pods all carry the toleration of its nodes' taint
    (appended by the syncer to whatever the pod asked for), which no other tenant's pods carry."""
    pods: dict[str, Any] = {"enabled": True}
    if tenant.trust_tier == "isolated":
        pods["enforceTolerations"] = [toleration(tenant.slug)]
    return pods


def render_sleep(tenant: TenantSpec, profile: ClusterProfile) -> dict[str, Any]:
    """vCluster sleep mode: after how long without requests its workloads sleep (releasing their GPUs).

    A suspended tenant, or one gpucloud put to sleep after an idle window, sleeps after a minute; any
    kubectl call wakes it (vCluster's own sleep mode). Otherwise the tenant's setting, else the host
    cluster's, applies; empty means never.
    """
    if tenant.desired == "suspended" or tenant.asleep:
        sleep_after = SUSPENDED_SLEEP_AFTER
    else:
        sleep_after = tenant.sleep_after_inactivity or profile.sleep_after_inactivity
    return {"sleep": {"auto": {"afterInactivity": sleep_after}}} if sleep_after else {}


def render_helm_repository(tenant: TenantSpec, profile: ClusterProfile) -> Manifest:
    """The chart source, in the tenant namespace so that no cross-namespace reference is needed."""
    spec = {"url": profile.vcluster_chart_repo, "interval": "1h"}
    repo = obj("source.toolkit.fluxcd.io/v1", "HelmRepository", REPOSITORY, tenant.namespace, spec=spec)
    return owned(repo, tenant.slug)


def render_helm_release(tenant: TenantSpec, profile: ClusterProfile) -> Manifest:
    """The Flux HelmRelease installing the vcluster chart into the tenant's host namespace."""
    name = vcluster_name(tenant)
    spec = {
        "interval": "10m",
        "releaseName": name,
        "chart": {
            "spec": {
                "chart": "vcluster",
                "version": profile.vcluster_chart_version,
                "sourceRef": {"kind": "HelmRepository", "name": REPOSITORY},
            }
        },
        "install": {"remediation": {"retries": 3}},
        "upgrade": {"remediation": {"retries": 3}},
        "values": render_values(tenant, profile),
    }
    release = obj("helm.toolkit.fluxcd.io/v2", "HelmRelease", name, tenant.namespace, spec=spec)
    return owned(release, tenant.slug)


def render_virtual_cluster_instance(tenant: TenantSpec, profile: ClusterProfile) -> Manifest:
    """A vCluster Platform VirtualClusterInstance with the same values as an inline template."""
    name = vcluster_name(tenant)
    values = yaml.safe_dump(render_values(tenant, profile), sort_keys=True)
    spec = {
        "displayName": tenant.slug,
        "clusterRef": {
            "cluster": profile.platform_cluster,
            "namespace": tenant.namespace,
            "virtualCluster": name,
        },
        "template": {
            "helmRelease": {
                "chart": {
                    "name": "vcluster",
                    "repo": profile.vcluster_chart_repo,
                    "version": profile.vcluster_chart_version,
                },
                "values": values,
            }
        },
    }
    instance = obj(
        "management.loft.sh/v1", "VirtualClusterInstance", name, profile.platform_project_namespace, spec=spec
    )
    return owned(instance, tenant.slug)


def render_vcluster(tenant: TenantSpec, profile: ClusterProfile) -> list[Manifest]:
    """The objects that install the tenant's vCluster in the host cluster's chosen mode."""
    if profile.vcluster_mode == "platform":
        return [render_virtual_cluster_instance(tenant, profile)]
    return [render_helm_repository(tenant, profile), render_helm_release(tenant, profile)]
