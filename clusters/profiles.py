"""What the renderers need to know about a registered host cluster: its profile, from its row and settings."""

from __future__ import annotations

from typing import get_args

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from clusters.render.profile import POD_SECURITY_LEVELS, ClusterProfile, OidcSettings
from clusters.spec import TrustTier
from fleet.models import HostCluster


def profile_of(host_cluster: HostCluster) -> ClusterProfile:
    """What the renderers need to know about a registered host cluster."""
    return ClusterProfile(
        scheduler=host_cluster.scheduler,  # type: ignore[arg-type]
        endpoint_base=host_cluster.endpoint_base,
        cilium=bool(host_cluster.addons.get("cilium")),
        vcluster_mode=host_cluster.vcluster_mode,  # type: ignore[arg-type]
        topology_levels=tuple(host_cluster.topology_levels),
        platform_cluster=host_cluster.name,
        sleep_after_inactivity=settings.VCLUSTER_SLEEP_AFTER_INACTIVITY,
        oidc=oidc_settings(),
        dra=bool(host_cluster.addons.get("dra") and host_cluster.addons.get("nvidia_dra_driver")),
        pod_security=pod_security_levels(),
        api_server_cidrs=tuple(host_cluster.api_server_cidrs),
        internet_egress=tuple(tier for tier in TIERS if settings.EGRESS_INTERNET.get(tier, True)),
    )


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
