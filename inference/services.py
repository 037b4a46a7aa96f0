"""Every write to inference endpoints: create, update, delete. Each validates (`inference.rules`), admits
the endpoint's replicas against the tenant's quota of its GPU class, writes in one transaction with its audit
row, and asks for the tenant's reconcile once that commits (the reconciler renders the endpoint).

Admission. The quota of a class is what Kueue or KAI will hold the tenant's pods to, so an endpoint must fit
in it next to the tenant's other endpoints of that class (running ones; a stopped endpoint holds nothing):
- its minimum (min replicas × units per replica) is guaranteed: the sum of the minimums fits `guaranteed`;
- its maximum may borrow: the sum of the maximums fits `guaranteed + burst`.
The host cluster's capacity was admitted when the quota was set (`tenants.capacity.admit`); this only
divides the quota. Pods the tenant runs itself in its cluster share the same quota at run time, where the
scheduler arbitrates (a replica beyond the guarantee is borrowed and may be preempted).

Lock order (`tenants/services/__init__.py`): the tenant row only, so two admissions of one tenant's endpoints
pass one at a time, and a quota change (which locks the same row) never interleaves with one.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import IntegrityError

from core import audit
from core.audit import Actor
from fleet.models import GpuClass
from gpucloud.errors import Conflict, NotFound, ServiceError, ValidationFailed
from gpucloud.transactions import atomic
from inference import rules
from inference.models import InferenceEndpoint
from tenants import tiers
from tenants.models import Quota, Tenant
from tenants.services import roles
from tenants.services.lifecycle import reconcile_on_commit, require_live

# Fields a caller sets, with their defaults on create.
DEFAULTS: dict[str, Any] = {
    "served_model_name": "",
    "revision": "",
    "engine": InferenceEndpoint.Engine.VLLM,
    "engine_args": [],
    "gpus_per_replica": 1,
    "min_replicas": 1,
    "max_replicas": 1,
    "context_length": None,
    "visibility": InferenceEndpoint.Visibility.TENANT,
    "price_per_million_tokens": None,
    "desired": InferenceEndpoint.Desired.RUNNING,
}
EDITABLE = ("model_name", "source_uri", "gpu_class", *DEFAULTS)


class EndpointExceedsQuota(ServiceError):
    """The endpoint's replicas do not fit the tenant's quota of its GPU class."""

    status = 422
    type = "endpoint-exceeds-quota"
    title = "The endpoint's replicas do not fit the tenant's quota"


def snapshot(endpoint: InferenceEndpoint) -> dict[str, Any]:
    """The endpoint as audited (its desired state; what the reconciler observed is not audited)."""
    price = endpoint.price_per_million_tokens
    return {
        "name": endpoint.name,
        "model_name": endpoint.model_name,
        "source_uri": endpoint.source_uri,
        "served_model_name": endpoint.served_model_name,
        "revision": endpoint.revision,
        "engine": endpoint.engine,
        "engine_args": list(endpoint.engine_args),
        "gpu_class": endpoint.gpu_class.name,
        "gpus_per_replica": endpoint.gpus_per_replica,
        "min_replicas": endpoint.min_replicas,
        "max_replicas": endpoint.max_replicas,
        "context_length": endpoint.context_length,
        "visibility": endpoint.visibility,
        "price_per_million_tokens": None if price is None else str(price),
        "desired": endpoint.desired,
    }


def _choice(field: str, value: Any, choices: type[Any]) -> str:
    if value not in choices.values:
        raise ValidationFailed.on(field, f"{field} must be one of {', '.join(choices.values)}, not {value!r}")
    return str(value)


def _price(value: Any) -> Decimal | None:
    if value is None or isinstance(value, Decimal):
        return value
    try:
        return Decimal(str(value))
    except ArithmeticError:
        raise ValidationFailed.on(
            "price_per_million_tokens", f"price_per_million_tokens must be a decimal number, not {value!r}"
        ) from None


def validate(endpoint: InferenceEndpoint) -> None:
    """Every rule of `inference.rules` on the endpoint's fields, normalising where a rule says how."""
    rules.name(endpoint.name)
    rules.model_name("model_name", endpoint.model_name)
    endpoint.served_model_name = endpoint.served_model_name or endpoint.model_name
    rules.model_name("served_model_name", endpoint.served_model_name)
    rules.revision(endpoint.revision)
    rules.source_uri(endpoint.source_uri)
    _choice("engine", endpoint.engine, InferenceEndpoint.Engine)
    gpu_class = endpoint.gpu_class
    rules.gpus_per_replica(endpoint.gpus_per_replica, gpu_class.kind, gpu_class.name)
    endpoint.engine_args = rules.engine_args(endpoint.engine_args, endpoint.gpus_per_replica)
    rules.replicas(endpoint.min_replicas, endpoint.max_replicas)
    rules.context_length(endpoint.context_length)
    _choice("visibility", endpoint.visibility, InferenceEndpoint.Visibility)
    endpoint.price_per_million_tokens = rules.price(
        endpoint.visibility, _price(endpoint.price_per_million_tokens)
    )
    _choice("desired", endpoint.desired, InferenceEndpoint.Desired)


@dataclass(frozen=True)
class Held:
    """Units of one class the tenant's other running endpoints hold at their minimum and maximum."""

    at_min: int
    at_max: int
    endpoints: int


def held_by_others(endpoint: InferenceEndpoint) -> Held:
    others = InferenceEndpoint.objects.filter(
        tenant=endpoint.tenant, gpu_class=endpoint.gpu_class, desired=InferenceEndpoint.Desired.RUNNING
    ).exclude(pk=endpoint.pk)
    rows = list(others.values_list("min_replicas", "max_replicas", "gpus_per_replica"))
    return Held(sum(a * g for a, _, g in rows), sum(b * g for _, b, g in rows), len(rows))


def admit(endpoint: InferenceEndpoint) -> None:
    """Refuse (422) an endpoint whose replicas do not fit the tenant's quota of its class (module docstring).
    The caller holds the tenant row's lock."""
    tenant, gpu_class = endpoint.tenant, endpoint.gpu_class
    tiers.require_allowed(tenant.trust_tier, gpu_class, who=f"tenant {tenant.slug} ({tenant.trust_tier})")
    if endpoint.desired != InferenceEndpoint.Desired.RUNNING:
        return
    quota = Quota.objects.filter(tenant=tenant, gpu_class=gpu_class).first()
    if quota is None:
        names = ", ".join(Quota.objects.filter(tenant=tenant).values_list("gpu_class__name", flat=True))
        message = (
            f"tenant {tenant.slug} holds no quota of {gpu_class.name}, so no endpoint can run on it; "
            f"its quotas: {names or 'none'} (a platform administrator sets quotas)"
        )
        raise EndpointExceedsQuota(message, errors={"gpu_class": [message]}, gpu_class=gpu_class.name)
    held = held_by_others(endpoint)
    _fit(endpoint, "min_replicas", endpoint.units_at_min, held.at_min, quota.guaranteed, "guaranteed", held)
    ceiling = quota.guaranteed + quota.burst
    _fit(endpoint, "max_replicas", endpoint.units_at_max, held.at_max, ceiling, "guaranteed + burst", held)


def _fit(
    endpoint: InferenceEndpoint, field: str, asked: int, taken: int, allowed: int, what: str, held: Held
) -> None:
    if taken + asked <= allowed:
        return
    replicas = getattr(endpoint, field)
    unit = endpoint.gpu_class.name
    message = (
        f"{field} {replicas} × {endpoint.gpus_per_replica} {unit} per replica asks for {asked}, but tenant "
        f"{endpoint.tenant.slug}'s quota of {unit} allows {allowed} ({what}) and its other {held.endpoints} "
        f"running endpoints of that class already take {taken}, so at most {max(0, allowed - taken)} is left"
    )
    raise EndpointExceedsQuota(
        message,
        errors={field: [message]},
        gpu_class=unit,
        requested=asked,
        allowed=allowed,
        taken=taken,
        available=max(0, allowed - taken),
    )


def _require_publisher(actor: Actor, endpoint: InferenceEndpoint, before: dict[str, Any] | None) -> None:
    """Publishing to other tenants, or changing a published endpoint's price, is the tenant's managers'."""
    published = endpoint.visibility == InferenceEndpoint.Visibility.PUBLISHED
    was = before is not None and before["visibility"] == InferenceEndpoint.Visibility.PUBLISHED
    if published or was:
        roles.require(actor, endpoint.tenant, "inference.publish", "publishing an inference endpoint")


def _save(actor: Actor, endpoint: InferenceEndpoint, before: dict[str, Any] | None) -> None:
    validate(endpoint)
    _require_publisher(actor, endpoint, before)
    admit(endpoint)
    try:
        endpoint.save()
    except IntegrityError:
        raise Conflict(
            f"tenant {endpoint.tenant.slug} already has an inference endpoint called {endpoint.name}",
            errors={"name": ["already taken in this tenant"]},
        ) from None


def _locked(actor: Actor, tenant: Tenant, what: str) -> Tenant:
    roles.require(actor, tenant, "inference.manage", what)
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    require_live(tenant, what)
    return tenant


@atomic
def create_endpoint(
    *,
    actor: Actor,
    tenant: Tenant,
    name: str,
    model_name: str,
    source_uri: str,
    gpu_class: GpuClass,
    **fields: Any,
) -> InferenceEndpoint:
    """Create an endpoint serving `model_name` from `source_uri` on `gpu_class` (docs/inference.md)."""
    tenant = _locked(actor, tenant, "creating an inference endpoint")
    unknown = set(fields) - set(DEFAULTS)
    if unknown:
        raise ValidationFailed.on(
            sorted(unknown)[0], f"not a field of an inference endpoint: {sorted(unknown)}"
        )
    if InferenceEndpoint.objects.filter(tenant=tenant, name=name).exists():
        raise Conflict(
            f"tenant {tenant.slug} already has an inference endpoint called {name}",
            errors={"name": ["already taken in this tenant"]},
        )
    endpoint = InferenceEndpoint(
        tenant=tenant, name=name, model_name=model_name, source_uri=source_uri, gpu_class=gpu_class
    )
    for field, default in DEFAULTS.items():
        setattr(endpoint, field, fields.get(field, default))
    _save(actor, endpoint, None)
    audit.record(
        actor,
        "inference_endpoint.create",
        object_type="inference_endpoint",
        object_id=endpoint.public_id,
        tenant=tenant,
        after=snapshot(endpoint),
    )
    reconcile_on_commit(tenant)
    return endpoint


@atomic
def update_endpoint(*, actor: Actor, endpoint: InferenceEndpoint, **changes: Any) -> InferenceEndpoint:
    """Change an endpoint's fields (any of `EDITABLE`; its name stays); admitted again as a whole."""
    tenant = _locked(actor, endpoint.tenant, "changing an inference endpoint")
    endpoint = _reread(endpoint, tenant)
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise ValidationFailed.on(
            sorted(unknown)[0],
            f"these fields cannot be changed: {sorted(unknown)}; changeable: {list(EDITABLE)}",
        )
    before = snapshot(endpoint)
    for field, value in changes.items():
        setattr(endpoint, field, value)
    _save(actor, endpoint, before)
    after = snapshot(endpoint)
    if after != before:
        audit.record(
            actor,
            "inference_endpoint.update",
            object_type="inference_endpoint",
            object_id=endpoint.public_id,
            tenant=tenant,
            before=before,
            after=after,
        )
        reconcile_on_commit(tenant)
    return endpoint


@atomic
def delete_endpoint(*, actor: Actor, endpoint: InferenceEndpoint) -> None:
    """Delete an endpoint; the reconciler then removes its objects from the host cluster."""
    tenant = _locked(actor, endpoint.tenant, "deleting an inference endpoint")
    endpoint = _reread(endpoint, tenant)
    if endpoint.visibility == InferenceEndpoint.Visibility.PUBLISHED:
        roles.require(actor, tenant, "inference.publish", "deleting a published inference endpoint")
    before = snapshot(endpoint)
    endpoint.delete()
    audit.record(
        actor,
        "inference_endpoint.delete",
        object_type="inference_endpoint",
        object_id=endpoint.public_id,
        tenant=tenant,
        before=before,
    )
    reconcile_on_commit(tenant)


def _reread(endpoint: InferenceEndpoint, tenant: Tenant) -> InferenceEndpoint:
    """The endpoint as stored now, under the tenant's lock (a concurrent change has committed or waits)."""
    row = InferenceEndpoint.objects.select_related("gpu_class__gpu_model").filter(pk=endpoint.pk).first()
    if row is None:
        raise NotFound(f"inference endpoint {endpoint.public_id} no longer exists")
    row.tenant = tenant
    return row
