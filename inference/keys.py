"""Virtual keys of the inference gateway: `gpk_` + 8-character lookup prefix + 32-character secret.

Hashed as API tokens are (`gpucloud/bearer.py`): only the prefix and an HMAC-SHA256 of the whole key (keyed
from SECRET_KEY, with a purpose of its own so a key's digest is never an API token's) are stored; the key is
returned once, on creation; checking compares digests in constant time. A key belongs to one tenant and
calls that tenant's endpoints (all of them, or the ones it names) and endpoints other tenants published.
Creating and revoking need `inference.manage`; both are audited. docs/inference.md, "Keys".
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from core import audit
from core.audit import Actor
from gpucloud.bearer import BearerKind, lapsed
from gpucloud.errors import NotFound, ValidationFailed
from gpucloud.transactions import atomic
from inference.models import InferenceEndpoint, InferenceKey
from tenants.models import Tenant
from tenants.services import roles
from tenants.services.lifecycle import require_live

KIND = "gpk_"
KEY = BearerKind(KIND, "gpucloud.inference-key")
LENGTH = KEY.length
digest = KEY.digest


def snapshot(key: InferenceKey) -> dict[str, Any]:
    """The key as audited (never its secret, nor its digest)."""
    return {
        "name": key.name,
        "prefix": key.prefix,
        "endpoints": sorted(key.endpoints.values_list("name", flat=True)),
        "rpm": key.rpm,
        "tpm": key.tpm,
        "monthly_tokens": key.monthly_tokens,
        "monthly_budget": None if key.monthly_budget is None else str(key.monthly_budget),
        "expires_at": key.expires_at.isoformat() if key.expires_at else None,
        "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
    }


def _positive(field: str, value: int | Decimal | None) -> None:
    if value is not None and value <= 0:
        raise ValidationFailed.on(field, f"{field} must be above 0, or empty for no limit; not {value}")


def _endpoints(tenant: Tenant, names: list[str]) -> list[InferenceEndpoint]:
    rows = {e.name: e for e in InferenceEndpoint.objects.filter(tenant=tenant, name__in=names)}
    missing = sorted(set(names) - set(rows))
    if missing:
        have = ", ".join(InferenceEndpoint.objects.filter(tenant=tenant).values_list("name", flat=True))
        raise ValidationFailed.on(
            "endpoints",
            f"tenant {tenant.slug} has no inference endpoint called {', '.join(missing)}; "
            f"its endpoints: {have or 'none'}",
        )
    return list(rows.values())


@atomic
def create_key(
    *,
    actor: Actor,
    tenant: Tenant,
    name: str,
    endpoints: list[str] | None = None,
    rpm: int | None = None,
    tpm: int | None = None,
    monthly_tokens: int | None = None,
    monthly_budget: Decimal | None = None,
    expires_at: datetime | None = None,
) -> tuple[InferenceKey, str]:
    """Make a key for `tenant`; returns the row and the key text, which is never stored."""
    roles.require(actor, tenant, "inference.manage", "creating an inference key")
    require_live(tenant, "creating an inference key")
    if not name.strip():
        raise ValidationFailed.on("name", "a key needs a name saying where it is used")
    for field, value in (("rpm", rpm), ("tpm", tpm), ("monthly_tokens", monthly_tokens)):
        _positive(field, value)
    _positive("monthly_budget", monthly_budget)
    if expires_at is not None and expires_at <= timezone.now():
        raise ValidationFailed.on("expires_at", "the expiry must be in the future")
    allowed = _endpoints(tenant, list(endpoints or []))
    prefix, text = KEY.issue(lambda p: InferenceKey.objects.filter(prefix=p).exists())
    key = InferenceKey.objects.create(
        tenant=tenant,
        name=name.strip(),
        prefix=prefix,
        digest=digest(text),
        rpm=rpm,
        tpm=tpm,
        monthly_tokens=monthly_tokens,
        monthly_budget=monthly_budget,
        expires_at=expires_at,
    )
    key.endpoints.set(allowed)
    audit.record(
        actor,
        "inference_key.create",
        object_type="inference_key",
        object_id=key.public_id,
        tenant=tenant,
        after=snapshot(key),
    )
    return key, text


@atomic
def revoke_key(*, actor: Actor, key: InferenceKey) -> InferenceKey:
    """Stop a key working at once (the gateway reads the key on every request); revoking twice is a no-op."""
    roles.require(actor, key.tenant, "inference.manage", "revoking an inference key")
    key = InferenceKey.objects.select_for_update().select_related("tenant").get(pk=key.pk)
    if key.revoked_at is not None:
        return key
    before = snapshot(key)
    key.revoked_at = timezone.now()
    key.save(update_fields=["revoked_at"])
    audit.record(
        actor,
        "inference_key.revoke",
        object_type="inference_key",
        object_id=key.public_id,
        tenant=key.tenant,
        before=before,
        after=snapshot(key),
    )
    return key


def check(text: str) -> tuple[InferenceKey | None, str]:
    """The live key `text` names, or None and the reason it is refused."""
    prefix = KEY.prefix_of(text)
    if prefix is None:
        return None, "the API key is not a gpucloud inference key (gpk_…)"
    key = InferenceKey.objects.select_related("tenant").filter(prefix=prefix).first()
    if key is None or not KEY.matches(key.digest, text):
        return None, "the API key is unknown"
    why = lapsed("the API key", key.revoked_at, key.expires_at, timezone.now())
    if why:
        return None, why
    if key.tenant.state in (Tenant.State.SUSPENDED, Tenant.State.DELETING, Tenant.State.DELETED):
        return None, f"the API key's tenant {key.tenant.slug} is {key.tenant.state}"
    return key, ""


def callable_endpoints(key: InferenceKey) -> QuerySet[InferenceEndpoint]:
    """What `key` may call: its tenant's endpoints (those it names, if any) and every published endpoint."""
    own = Q(tenant=key.tenant)
    named = list(key.endpoints.values_list("pk", flat=True))
    if named:
        own &= Q(pk__in=named)
    published = Q(visibility=InferenceEndpoint.Visibility.PUBLISHED) & ~Q(tenant=key.tenant)
    rows = InferenceEndpoint.objects.filter(own | published, desired=InferenceEndpoint.Desired.RUNNING)
    return rows.select_related("tenant").order_by("served_model_name", "tenant__slug")


def visible_endpoint(key: InferenceKey, model: str) -> InferenceEndpoint | None:
    """The endpoint serving `model` that the key's tenant can see at all (its own, or published), or None.
    The key's own tenant's endpoint wins over a published one of the same served name."""
    rows = InferenceEndpoint.objects.filter(
        Q(tenant=key.tenant) | Q(visibility=InferenceEndpoint.Visibility.PUBLISHED), served_model_name=model
    ).select_related("tenant")
    return sorted(rows, key=lambda e: (e.tenant_id != key.tenant_id, e.pk))[0] if rows else None


def get_key(tenant: Tenant, public_id: str) -> InferenceKey:
    key = InferenceKey.objects.filter(tenant=tenant, public_id=public_id).first()
    if key is None:
        raise NotFound(f"tenant {tenant.slug} has no inference key {public_id}")
    return key
