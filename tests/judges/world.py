"""What a judge sees of one host cluster: its profile, its tenants and what gpucloud rendered for them.

(quotas' copy of the `World` of the issue-26 design, identical in shape to the admission helper's; the
lead keeps one at merge.)
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
        """The tenant whose host namespace this is."""
        for tenant in self.tenants:
            if tenant.namespace == namespace:
                return tenant
        raise LookupError(f"no tenant has the host namespace {namespace!r}")

    def objects(self, kind: str, namespace: str | None = None) -> list[Manifest]:
        """The rendered objects of a kind (in one namespace, when given)."""
        return [
            o
            for o in self.rendered
            if o["kind"] == kind and (namespace is None or o["metadata"].get("namespace") == namespace)
        ]
