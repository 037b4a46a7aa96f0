"""What the judges see of a host cluster: its profile, its tenants and everything gpucloud rendered for it.

The shape is the shared design of issue 26 (every judge is written against exactly this dataclass).
"""

from __future__ import annotations

from dataclasses import dataclass

from clusters.render import ClusterProfile
from clusters.spec import TenantSpec
from gpucloud.kube.meta import Manifest


@dataclass(frozen=True)
class World:
    profile: ClusterProfile
    tenants: tuple[TenantSpec, ...]  # every tenant on the host cluster
    rendered: tuple[Manifest, ...]  # render_shared(tenants, profile) + render_tenant(t, profile) for all t
    nodes: tuple[Manifest, ...] = ()  # host Node objects (labels, taints) as the cluster has them
    running: tuple[Manifest, ...] = ()  # pods already running (for quota usage)

    def tenant_of(self, namespace: str) -> TenantSpec:
        """The tenant whose host namespace this is (KeyError for a namespace of no tenant)."""
        for tenant in self.tenants:
            if tenant.namespace == namespace:
                return tenant
        raise KeyError(f"no tenant has the host namespace {namespace!r}")

    def objects(self, kind: str, namespace: str | None = None) -> list[Manifest]:
        """The rendered objects of a kind, in one namespace or (None) all."""
        return [
            o
            for o in self.rendered
            if o["kind"] == kind and (namespace is None or o["metadata"].get("namespace") == namespace)
        ]
