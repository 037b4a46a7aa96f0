"""The simulated driver: tenant clusters on the built-in simulated fleet.

It behaves like a slow, well-mannered Kubernetes cluster: a tenant cluster is provisioning for a configurable
delay before it is ready, deleting takes a moment too, and every change is a row in
`SimulatedTenantCluster`. It writes only when desired and actual state differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from clusters.models import SimulatedTenantCluster
from clusters.spec import ReconcileResult, TenantObservation, TenantSpec
from fleet.models import HostCluster


def _quotas(spec: TenantSpec) -> list[dict[str, object]]:
    return [
        {k: v for k, v in asdict(q).items() if k not in ("node_labels", "per_unit")}
        for q in sorted(spec.quotas, key=lambda q: q.gpu_class)
    ]


class SimulatedDriver:
    """Drives tenants on one simulated host cluster."""

    def __init__(self, host_cluster: HostCluster, now: datetime | None = None) -> None:
        self.host_cluster = host_cluster
        self.now = now or timezone.now()
        self.provision_delay = timedelta(seconds=settings.SIMULATED_PROVISION_DELAY)
        self.delete_delay = timedelta(seconds=settings.SIMULATED_DELETE_DELAY)

    def reconcile(self, tenants: Sequence[TenantSpec], *, complete: bool) -> ReconcileResult:
        result = ReconcileResult()
        rows = SimulatedTenantCluster.objects.filter(host_cluster=self.host_cluster)
        if not complete:  # a pass over some tenants reads only theirs (a complete one also prunes the rest)
            rows = rows.filter(slug__in=[spec.slug for spec in tenants])
        existing = {r.slug: r for r in rows}
        result.api_calls += 1
        for spec in tenants:
            row = existing.pop(spec.slug, None)
            if spec.desired == "absent":
                result.observations[spec.slug] = self._remove(spec, row, result)
            else:
                result.observations[spec.slug] = self._ensure(spec, row, result)
        if complete:
            for stray in existing.values():  # owned by no tenant any more: prune
                stray.delete()
                result.writes += 1
        return result

    def _endpoint(self, spec: TenantSpec) -> str:
        return f"https://{spec.slug}.{self.host_cluster.name}.{settings.ENDPOINT_DOMAIN}"

    def _ensure(
        self, spec: TenantSpec, row: SimulatedTenantCluster | None, result: ReconcileResult
    ) -> TenantObservation:
        suspended = spec.desired == "suspended"
        if row is None:
            row = SimulatedTenantCluster.objects.create(
                host_cluster=self.host_cluster,
                slug=spec.slug,
                namespace=spec.namespace,
                endpoint=self._endpoint(spec),
                quotas=_quotas(spec),
                suspended=suspended,
                created_at=self.now,
                ready_at=self.now + self.provision_delay,
            )
            result.writes += 1
        else:
            self._update(spec, row, suspended, result)
        return self._observe(spec, row)

    def _update(
        self, spec: TenantSpec, row: SimulatedTenantCluster, suspended: bool, result: ReconcileResult
    ) -> None:
        changed = []
        if row.quotas != _quotas(spec):
            row.quotas = _quotas(spec)
            changed.append("quotas")
        if row.suspended != suspended:
            row.suspended = suspended
            changed.append("suspended")
            if not suspended:  # waking up takes as long as coming up
                row.ready_at = self.now + self.provision_delay
                changed.append("ready_at")
        if changed:
            row.save(update_fields=changed)
            result.writes += 1

    def _observe(self, spec: TenantSpec, row: SimulatedTenantCluster) -> TenantObservation:
        if row.suspended:
            phase = "suspended"
        elif self.now < row.ready_at:
            phase = "provisioning"
        else:
            phase = "ready"
        return TenantObservation(spec.slug, phase, endpoint=row.endpoint)  # type: ignore[arg-type]

    def _remove(
        self, spec: TenantSpec, row: SimulatedTenantCluster | None, result: ReconcileResult
    ) -> TenantObservation:
        if row is None:
            return TenantObservation(spec.slug, "absent")
        if row.deleting_since is None:
            row.deleting_since = self.now
            row.save(update_fields=["deleting_since"])
            result.writes += 1
        if self.now >= row.deleting_since + self.delete_delay:
            row.delete()
            result.writes += 1
            return TenantObservation(spec.slug, "absent")
        return TenantObservation(spec.slug, "deleting", endpoint=row.endpoint)
