"""The base layer's records: the append-only audit log of every write, and the responses kept for idempotent
POSTs.

Both tables keep the names they had in the `tenants` app (`tenants_auditevent`, `tenants_idempotencyrecord`):
core took them over in Django's state only (migrations core 0001 and tenants 0010), so no data moved.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from gpucloud.ids import PublicIdField


class AuditEvent(models.Model):
    """One write, who made it and what changed. Rows are only ever added."""

    public_id = PublicIdField(prefix="aud")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # The table is append-only (a database trigger refuses UPDATE and DELETE), so deleting a user or a tenant
    # must not touch it: no database constraint and DO_NOTHING; the labels keep the names readable.
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    actor_label = models.CharField(max_length=150, help_text="username, token or system process")
    tenant = models.ForeignKey(
        "tenants.Tenant",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    action = models.CharField(max_length=60, db_index=True)
    object_type = models.CharField(max_length=40)
    object_id = models.CharField(max_length=120)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    request_id = models.CharField(max_length=64, blank=True)
    source_ip = models.CharField(max_length=45, blank=True)
    user_agent = models.CharField(max_length=300, blank=True)

    class Meta:
        db_table = "tenants_auditevent"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.actor_label} {self.action} {self.object_type}:{self.object_id}"

    def changes(self) -> list[dict[str, Any]]:
        """What the write changed, field by field: `{"field", "before", "after"}` for each field whose value
        differs, nested values flattened to dotted names (`prices.h200-141gb`), unchanged fields left out.
        A creation or an occurrence (no `before`) lists what `after` says; a removal (no `after`) what
        `before` said; a field one side lacks is None on that side. Fields both sides have come first, then
        those of one side, each in name order (PostgreSQL's jsonb keeps no order of its own)."""
        before, after = _flat(self.before), _flat(self.after)
        fields = sorted(before.keys() | after.keys(), key=lambda f: (f not in before or f not in after, f))
        return [
            {"field": f, "before": before.get(f), "after": after.get(f)}
            for f in fields
            if f not in before or f not in after or before[f] != after[f]
        ]


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """A JSON object as {dotted name: value}; lists and scalars are values, an empty object is one too."""
    if not isinstance(value, dict):
        return {} if value is None and not prefix else {prefix: value}
    if not value and prefix:
        return {prefix: value}
    flat: dict[str, Any] = {}
    for key, inner in value.items():
        flat.update(_flat(inner, f"{prefix}.{key}" if prefix else str(key)))
    return flat


class IdempotencyRecord(models.Model):
    """The response to a POST made with an `Idempotency-Key`, replayed when the same request comes again."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    fingerprint = models.CharField(max_length=64, help_text="hash of method, path and body")
    status_code = models.PositiveSmallIntegerField(null=True)
    body = models.JSONField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "tenants_idempotencyrecord"
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotency_unique_key")]

    def __str__(self) -> str:
        return self.key
