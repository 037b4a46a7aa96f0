"""Budget alert webhooks: where they may point, and how they are sent.

A webhook is a request the server makes on a tenant's behalf, so it goes through the one guarded outbound
check (`gpucloud.outbound`): checked when it is saved and again when it is sent, every address its host
resolves to public (or inside an operator's `GPUCLOUD_WEBHOOK_ALLOWED_NETWORKS`), sent to the very address
checked, redirects not followed. Only https is allowed unless the operator sets `GPUCLOUD_WEBHOOK_ALLOW_HTTP`.

The URL is kept encrypted at rest (`gpucloud.crypto`): it often carries a secret (Slack's and Teams' do).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.conf import settings

from gpucloud import crypto, outbound
from gpucloud.errors import ValidationFailed

log = logging.getLogger(__name__)


def policy() -> outbound.Policy:
    """Where budget webhooks may go (read at each use: the settings may change under tests)."""
    return outbound.Policy(
        what="webhook",
        field="webhook_url",
        schemes=("https", "http") if settings.WEBHOOK_ALLOW_HTTP else ("https",),
        allowed_networks=settings.WEBHOOK_ALLOWED_NETWORKS,
        networks_setting="GPUCLOUD_WEBHOOK_ALLOWED_NETWORKS",
        scheme_hint=""
        if settings.WEBHOOK_ALLOW_HTTP
        else " (an operator may allow http: GPUCLOUD_WEBHOOK_ALLOW_HTTP)",
    )


def destination(url: str) -> outbound.Destination:
    """Parse, resolve and check `url`; raises ValidationFailed saying what is wrong and what is allowed."""
    return outbound.destination(url, policy())


def seal(url: str) -> str:
    """Check a webhook URL being saved (see `destination`) and encrypt it; "" stays "" (no webhook)."""
    if not url:
        return ""
    destination(url)
    return crypto.encrypt(url)


def send(url: str, payload: dict[str, Any]) -> bool:
    """POST `payload` as JSON to the webhook, checked again now; returns whether it was delivered (2xx).

    Never raises: the alert stands in the audit log, and a dead or refused webhook must not stop metering.
    The URL is never logged (it may hold a secret), only its host.
    """
    try:
        where = destination(url)
    except ValidationFailed as exc:
        log.warning("budget webhook refused", extra={"error": exc.detail})
        return False
    try:
        status = outbound.post(
            where,
            json.dumps(payload).encode(),
            content_type="application/json",
            timeout=settings.BILLING_WEBHOOK_TIMEOUT,
        )
    except OSError as exc:
        log.warning("budget webhook failed", extra={"host": where.host, "error": str(exc)})
        return False
    if 200 <= status < 300:
        return True
    error = f"answered {status}" + (" (redirects are not followed)" if 300 <= status < 400 else "")
    log.warning("budget webhook failed", extra={"host": where.host, "error": error})
    return False
