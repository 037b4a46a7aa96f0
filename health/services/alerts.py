"""Telling the platform administrators, by webhook and e-mail, that something was quarantined."""

from __future__ import annotations

import json
import logging
import urllib.request
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail

from health.models import Quarantine
from health.selectors import quarantine_share_by_model

log = logging.getLogger(__name__)


def notify(quarantine_id: int) -> dict[str, Any] | None:
    """Tell the platform administrators (webhook and e-mail) that something was quarantined, and which GPU
    models have more than `HEALTH_ALERT_SHARE` of their GPUs out. Returns what was sent."""
    q = (
        Quarantine.objects.select_related("node__host_cluster", "gpu__gpu_model", "event")
        .filter(pk=quarantine_id)
        .first()
    )
    if q is None:
        return None
    target = f"GPU {q.gpu.index} ({q.gpu.uuid}) of node {q.node.name}" if q.gpu else f"node {q.node.name}"
    over = [m for m in quarantine_share_by_model() if m.share > settings.HEALTH_ALERT_SHARE]
    message: dict[str, Any] = {
        "kind": "gpucloud.health.quarantine",
        "host_cluster": q.node.host_cluster.name,
        "node": q.node.name,
        "gpu": q.gpu.uuid if q.gpu else None,
        "reason": q.reason,
        "event": q.event.public_id if q.event else None,
        "message": q.event.message if q.event else "",
        "started_at": q.started_at.isoformat(),
        "models_over_threshold": [{"model": m.model, "gpus": m.gpus, "out": m.quarantined} for m in over],
    }
    subject = f"[gpucloud] quarantined: {target} on {q.node.host_cluster.name} ({q.reason})"
    lines = [subject, "", message["message"]]
    lines += [
        f"{m.model}: {m.quarantined} of {m.gpus} GPUs out ({m.share:.0%}), above the alert share"
        for m in over
    ]
    _send(message, subject, "\n".join(lines))
    return message


def _send(message: dict[str, Any], subject: str, body: str) -> None:
    url = settings.HEALTH_ALERT_WEBHOOK_URL
    if url:
        request = urllib.request.Request(
            url,
            data=json.dumps(message).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=settings.BILLING_WEBHOOK_TIMEOUT):  # operator's URL
                pass
        except OSError as exc:
            log.warning("health webhook failed", extra={"url": url, "error": str(exc)})
    admins = get_user_model().objects.filter(is_staff=True, is_active=True).exclude(email="")
    recipients = sorted({*settings.HEALTH_ALERT_EMAILS, *admins.values_list("email", flat=True)})
    if recipients:
        sender = settings.BILLING_ALERT_EMAIL_FROM or settings.DEFAULT_FROM_EMAIL
        try:
            send_mail(subject, body, sender, recipients)
        except OSError as exc:
            log.warning("health e-mail failed", extra={"error": str(exc)})
