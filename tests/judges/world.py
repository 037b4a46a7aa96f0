"""The host cluster a judge judges a pod against: gpucloud's rendered objects, its nodes, its running pods."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from clusters.render import ClusterProfile, Manifest, render_shared, render_tenant
from clusters.spec import TenantSpec


@dataclass(frozen=True)
class World:
    profile: ClusterProfile
    tenants: tuple[TenantSpec, ...]  # every tenant on the host cluster
    rendered: tuple[Manifest, ...]  # render_shared(tenants, profile) + render_tenant(t, profile) for all t
    nodes: tuple[Manifest, ...] = ()  # host Node objects (labels, taints) as the cluster has them
    running: tuple[Manifest, ...] = ()  # pods already running (for quota usage)

    def tenant_of(self, namespace: str) -> TenantSpec:
        """The tenant whose host namespace this is (KeyError naming the namespace when none is)."""
        for tenant in self.tenants:
            if tenant.namespace == namespace:
                return tenant
        raise KeyError(f"no tenant has the host namespace {namespace!r}")

    def objects(self, kind: str, namespace: str | None = None) -> list[Manifest]:
        """Rendered objects of one kind, in one namespace when it is given."""
        return [
            o
            for o in self.rendered
            if o["kind"] == kind and (namespace is None or o["metadata"].get("namespace") == namespace)
        ]


def world_of(
    profile: ClusterProfile,
    tenants: Sequence[TenantSpec],
    nodes: Sequence[Manifest] = (),
    running: Sequence[Manifest] = (),
) -> World:
    """A World whose `rendered` is exactly what gpucloud renders for these tenants on this profile."""
    rendered = list(render_shared(tenants, profile))
    for tenant in tenants:
        rendered += render_tenant(tenant, profile)
    return World(profile, tuple(tenants), tuple(rendered), tuple(nodes), tuple(running))
