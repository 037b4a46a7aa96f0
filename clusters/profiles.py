"""What the renderers need to know about a registered host cluster: its profile, from its row and settings."""

from __future__ import annotations

from typing import get_args

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from clusters.render.profile import POD_SECURITY_LEVELS, ClusterProfile, OidcSettings
from clusters.spec import TrustTier
from fleet import catalog
from fleet.models import GpuClass, HostCluster


def profile_of(host_cluster: HostCluster) -> ClusterProfile:
    """What the renderers need to know about a registered host cluster."""
    return ClusterProfile(
        scheduler=host_cluster.scheduler,  # type: ignore[arg-type]
        endpoint_base=host_cluster.endpoint_base,
        cilium=bool(host_cluster.addons.get("cilium")),
        vcluster_mode=host_cluster.vcluster_mode,  # type: ignore[arg-type]
        topology_levels=tuple(host_cluster.topology_levels),
        nvlink_domains=bool(host_cluster.addons.get("nvlink_domains")),
        kai_topology=bool(host_cluster.addons.get("kai_topology")),
        platform_cluster=host_cluster.name,
        sleep_after_inactivity=settings.VCLUSTER_SLEEP_AFTER_INACTIVITY,
        oidc=oidc_settings(),
        dra=bool(host_cluster.addons.get("dra") and host_cluster.addons.get("nvidia_dra_driver")),
        gpu_resources=gpu_resources_of(host_cluster),
        mutating_admission=next(
            (v for v in ("v1", "v1beta1") if host_cluster.addons.get(f"mutating_admission_policy_{v}")), ""
        ),
        pod_security=pod_security_levels(),
        api_server_cidrs=tuple(host_cluster.api_server_cidrs),
        internet_egress=tuple(tier for tier in TIERS if settings.EGRESS_INTERNET.get(tier, True)),
        inference=bool(
            host_cluster.addons.get("gateway_api") and host_cluster.addons.get("inference_extension")
        ),
        kserve=bool(host_cluster.addons.get("kserve")),
        inference_gateway=(settings.INFERENCE_GATEWAY_NAME, settings.INFERENCE_GATEWAY_NAMESPACE),
        inference_image=settings.INFERENCE_VLLM_IMAGE,
        inference_cpu=settings.INFERENCE_CPU,
        inference_memory=settings.INFERENCE_MEMORY,
    )


def gpu_resources_of(host_cluster: HostCluster) -> tuple[str, ...]:
    """Every GPU resource name the host cluster offers: on a Kubernetes cluster as discovery last read it
    (every pass, `clusters.partitions.gpu_pass.check_conformance`); on a simulated one the resource names
    of the GPU classes of the models its nodes hold (HAMi's memory and cores with its fraction classes)."""
    if host_cluster.driver != HostCluster.Driver.SIMULATED:
        return tuple(sorted(host_cluster.gpu_resources))
    classes = GpuClass.objects.filter(gpu_model__gpus__node__host_cluster=host_cluster).distinct()
    names = set()
    for kind, resource_name in classes.values_list("kind", "resource_name"):
        names.add(resource_name)
        if kind == GpuClass.Kind.FRACTION:
            names |= {catalog.HAMI_MEMORY, catalog.HAMI_CORES}
    return tuple(sorted(names))


TIERS: tuple[str, ...] = get_args(TrustTier)


def pod_security_levels() -> tuple[tuple[str, str], ...]:
    """The Pod Security Standard of each trust tier (settings.POD_SECURITY, GPUCLOUD_POD_SECURITY_<TIER>)."""
    levels = settings.POD_SECURITY
    for tier in TIERS:
        if levels.get(tier) not in POD_SECURITY_LEVELS:
            raise ImproperlyConfigured(
                f"POD_SECURITY[{tier!r}] is {levels.get(tier)!r}; "
                f"use one of: {', '.join(POD_SECURITY_LEVELS)} (GPUCLOUD_POD_SECURITY_{tier.upper()})"
            )
    return tuple((tier, levels[tier]) for tier in TIERS)


def oidc_settings() -> OidcSettings | None:
    """The provider tenant API servers trust: gpucloud's own, for the CLI's client id; None without SSO."""
    if not settings.OIDC_ISSUER:
        return None
    return OidcSettings(
        issuer=settings.OIDC_ISSUER,
        client_id=settings.OIDC_KUBERNETES_CLIENT_ID,
        username_claim=settings.OIDC_KUBERNETES_USERNAME_CLAIM,
        groups_claim=settings.OIDC_GROUPS_CLAIM,
        prefix=settings.OIDC_KUBERNETES_PREFIX,
    )
