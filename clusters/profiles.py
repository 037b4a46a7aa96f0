"""What the renderers need to know about a registered host cluster: its profile, from its row and settings."""

from __future__ import annotations

from django.conf import settings

from clusters.render.profile import ClusterProfile, OidcSettings
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
    )


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
