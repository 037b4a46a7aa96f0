"""What the gateway reads and writes in the database, as plain synchronous functions (run in a thread pool by
`inference.gateway.app`): who a key is and what it may call, what it spent this month, and one usage row per
request.

The key is read on every request, so a revoked key stops working at the next request, on every replica of the
gateway; the monthly budget is summed from the usage rows (the ledger billing rates), so it survives a Redis
restart and every gateway replica sees the same figure.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.db.models import F, Sum
from django.utils import timezone

from inference import keys
from inference.models import InferenceEndpoint, InferenceKey, InferenceUsage

MILLION = Decimal(1_000_000)


class Refused(Exception):
    """A request the gateway answers itself, in OpenAI's error shape."""

    def __init__(
        self, status: int, message: str, type: str, code: str, retry_after: int | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code = status, message, type, code
        self.retry_after = retry_after


@dataclass(frozen=True)
class Caller:
    """A live key, as the gateway needs it."""

    key_id: int
    public_id: str
    tenant_id: int
    rpm: int | None
    tpm: int | None


@dataclass(frozen=True)
class Grant:
    """A key allowed to call one endpoint, and where that endpoint is served."""

    caller: Caller
    endpoint_id: int
    model: str
    upstream: str
    price: Decimal | None  # per million tokens, when the caller pays it (another tenant's published endpoint)


def upstream(endpoint: InferenceEndpoint) -> str:
    """The endpoint's base URL: an override from GPUCLOUD_GATEWAY_UPSTREAMS, else its Service on the host
    cluster (`clusters/render/inference.py`: `ie-<name>` in `tenant-<slug>`, port 8000)."""
    named = f"{endpoint.tenant.slug}/{endpoint.name}"
    override = settings.GATEWAY_UPSTREAMS.get(named)
    return (override or f"http://ie-{endpoint.name}.tenant-{endpoint.tenant.slug}.svc:8000").rstrip("/")


def authenticate(text: str) -> InferenceKey:
    if not text:
        raise Refused(
            401, "no API key: send Authorization: Bearer gpk_…", "invalid_request_error", "missing_api_key"
        )
    key, reason = keys.check(text)
    if key is None:
        raise Refused(401, reason, "invalid_request_error", "invalid_api_key")
    now = timezone.now()
    if key.last_used_at is None or (now - key.last_used_at).total_seconds() >= 60:
        # At most once a minute per key: a write per request would cost more than the request's own reads.
        InferenceKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return key


def caller(key: InferenceKey) -> Caller:
    return Caller(key.pk, key.public_id, key.tenant_id, key.rpm, key.tpm)


def _month_start(now: dt.datetime) -> dt.datetime:
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def _seconds_to_next_month(now: dt.datetime) -> int:
    start = _month_start(now)
    following = (start + dt.timedelta(days=32)).replace(day=1)
    return max(1, int((following - now).total_seconds()))


def check_budget(key: InferenceKey) -> None:
    """Refuse (429, `insufficient_quota`) a key whose tokens or spend this calendar month (UTC) reached its
    budget. The request that crosses it is served: its tokens are known only once it is."""
    if key.monthly_tokens is None and key.monthly_budget is None:
        return
    now = timezone.now()
    spent = InferenceUsage.objects.filter(key=key, created_at__gte=_month_start(now)).aggregate(
        tokens=Sum(F("prompt_tokens") + F("completion_tokens")), cost=Sum("cost")
    )
    tokens, cost = spent["tokens"] or 0, spent["cost"] or Decimal(0)
    if key.monthly_tokens is not None and tokens >= key.monthly_tokens:
        message = f"the key's budget of {key.monthly_tokens} tokens this month is spent ({tokens} used)"
    elif key.monthly_budget is not None and cost >= key.monthly_budget:
        message = f"the key's budget of {key.monthly_budget} this month is spent ({cost:.6f} used)"
    else:
        return
    raise Refused(429, message, "insufficient_quota", "insufficient_quota", _seconds_to_next_month(now))


def grant(text: str, model: str) -> Grant:
    """The endpoint serving `model` that the key `text` may call, or a refusal: 401 bad key, 404 no such
    model in the key's sight (another tenant's unpublished endpoint is not found), 403 an own endpoint the key
    is not allowed, 503 a stopped endpoint, 429 a spent budget."""
    key = authenticate(text)
    if not isinstance(model, str) or not model:
        raise Refused(400, "the request names no `model`", "invalid_request_error", "missing_model")
    endpoint = keys.visible_endpoint(key, model)
    if endpoint is None:
        raise Refused(
            404,
            f"the model {model!r} does not exist or is not yours",
            "invalid_request_error",
            "model_not_found",
        )
    named = list(key.endpoints.values_list("pk", flat=True))
    if endpoint.tenant_id == key.tenant_id and named and endpoint.pk not in named:
        raise Refused(
            403,
            f"the key {key.name!r} may not call {model!r}; it may call: "
            + ", ".join(sorted(key.endpoints.values_list("served_model_name", flat=True))),
            "invalid_request_error",
            "model_not_allowed",
        )
    if endpoint.desired != InferenceEndpoint.Desired.RUNNING:
        raise Refused(503, f"the endpoint serving {model!r} is stopped", "server_error", "endpoint_stopped")
    check_budget(key)
    pays = endpoint.tenant_id != key.tenant_id
    return Grant(
        caller(key),
        endpoint.pk,
        model,
        upstream(endpoint),
        endpoint.price_per_million_tokens if pays else None,
    )


def models(text: str) -> list[dict[str, object]]:
    """GET /v1/models: what the key may call, one entry per served name (its own tenant's first)."""
    key = authenticate(text)
    seen: dict[str, dict[str, object]] = {}
    for endpoint in sorted(keys.callable_endpoints(key), key=lambda e: e.tenant_id != key.tenant_id):
        seen.setdefault(
            endpoint.served_model_name,
            {
                "id": endpoint.served_model_name,
                "object": "model",
                "created": int(endpoint.created_at.timestamp()),
                "owned_by": endpoint.tenant.slug,
            },
        )
    return sorted(seen.values(), key=lambda m: str(m["id"]))


@dataclass
class Metered:
    """What one request through the gateway did, written once as an `InferenceUsage` row."""

    request_id: str
    route: str
    stream: bool
    status: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: int = 0
    first_byte_ms: int | None = None
    completed: bool = True
    recorded: bool = False  # the row is written: once, before a stream's [DONE] or when the request ends

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def read_usage(self, usage: object) -> None:
        """Take the counts of an OpenAI `usage` object (vLLM's: cached prompt tokens in its details)."""
        if not isinstance(usage, dict):
            return
        self.prompt_tokens = _count(usage.get("prompt_tokens"))
        self.completion_tokens = _count(usage.get("completion_tokens"))
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict):
            self.cached_prompt_tokens = _count(details.get("cached_tokens"))


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def record(grant: Grant, metered: Metered) -> None:
    """Write the request's usage row; a second write of the same request id is ignored (exactly once)."""
    cost = Decimal(0) if grant.price is None else grant.price * metered.tokens / MILLION
    row = InferenceUsage(
        request_id=metered.request_id,
        key_id=grant.caller.key_id,
        tenant_id=grant.caller.tenant_id,
        endpoint_id=grant.endpoint_id,
        model=grant.model[:200],
        route=metered.route,
        stream=metered.stream,
        status=metered.status,
        prompt_tokens=metered.prompt_tokens,
        cached_prompt_tokens=metered.cached_prompt_tokens,
        completion_tokens=metered.completion_tokens,
        cost=cost,
        latency_ms=metered.latency_ms,
        first_byte_ms=metered.first_byte_ms,
        completed=metered.completed,
    )
    # One INSERT … ON CONFLICT DO NOTHING: a second write of the request id (a retry) changes nothing.
    InferenceUsage.objects.bulk_create([row], ignore_conflicts=True)
