"""Coalesced reconciles: a burst of changes on one host cluster becomes one pass over it, over what changed.

Each change records the tenant (`note_change`) and asks for a pass (`request_pass`); only the first ask while
none is pending enqueues one, the rest ride on it. The pass clears the request and takes the changed tenants
before it reads any state (`begin_pass`), so a change committed after that asks for a pass of its own and is
never missed; a pass that fails gives its tenants back (`give_back`) for its retry. A request older than STALE
whose pass never started (the broker lost the message, the worker died before it ran) is taken over by the
next ask. The periodic pass over every tenant (`workers.reconcile_all`, one `workers.full_pass` per host
cluster) remains the level-triggered backstop.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.utils import timezone

from clusters.models import PassRequest, TenantChange

STALE = timedelta(minutes=1)


def request_pass(host_cluster_id: int) -> bool:
    """Ask for a pass over the host cluster; True when the caller must enqueue it (none was pending)."""
    now = timezone.now()
    table = connection.ops.quote_name(PassRequest._meta.db_table)
    # One statement, so two workers asking at once cannot both win: the row either is inserted, or updated
    # only if nothing is pending, and RETURNING says which.
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (host_cluster_id, requested_at) VALUES (%s, %s) "
            f"ON CONFLICT (host_cluster_id) DO UPDATE SET requested_at = excluded.requested_at "
            f"WHERE {table}.requested_at IS NULL OR {table}.requested_at < %s "
            "RETURNING host_cluster_id",
            [host_cluster_id, now, now - STALE],
        )
        return cursor.fetchone() is not None


def note_change(host_cluster_id: int, tenant_ids: list[int]) -> None:
    """These tenants changed: the next pass over the host cluster looks at them."""
    TenantChange.objects.bulk_create(
        [TenantChange(tenant_id=t, host_cluster_id=host_cluster_id) for t in tenant_ids],
        ignore_conflicts=True,
    )


def begin_pass(host_cluster_id: int) -> list[int]:
    """The pass starts: it takes the changed tenants; changes from now on need a pass of their own."""
    PassRequest.objects.filter(host_cluster_id=host_cluster_id).update(requested_at=None)
    changes = TenantChange.objects.filter(host_cluster_id=host_cluster_id)
    tenant_ids = list(changes.values_list("tenant_id", flat=True))
    changes.filter(tenant_id__in=tenant_ids).delete()
    return tenant_ids


def give_back(host_cluster_id: int, tenant_ids: list[int]) -> None:
    """A pass that failed returns what it took, so its retry (or the next pass) looks at them again."""
    note_change(host_cluster_id, tenant_ids)
