"""The GitOps push webhook over real HTTP: no existence oracle, and no replays (issue 24 §1)."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import timedelta
from typing import Any

import pytest
import requests
from django.utils import timezone

from core.audit import Actor
from gitops import services

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queued(monkeypatch) -> list[tuple[str, tuple[int, ...]]]:
    """The syncs the webhook queued (the broker stays out of it: what is sent is what we check)."""
    sent: list[tuple[str, tuple[int, ...]]] = []
    monkeypatch.setattr("gpucloud.celery.app.send_task", lambda name, args=(), **_: sent.append((name, args)))
    return sent


@pytest.fixture
def platform(db):
    return services.create_source(
        actor=Actor.console("test"),
        name="platform",
        url="https://git.example.com/platform.git",
        webhook_secret="hook-secret",
    )


def push(live_server, name: str, body: bytes, secret: str = "hook-secret", **headers: str) -> Any:
    signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return requests.post(
        f"{live_server.url}/api/v1/gitops/sources/{name}/webhook/",
        data=body,
        headers={"Content-Type": "application/json", "X-Hub-Signature-256": signature, **headers},
        timeout=30,
    )


def body_of(after: str) -> bytes:
    return json.dumps({"ref": "refs/heads/main", "after": after}).encode()


def test_a_wrong_signature_answers_exactly_like_a_source_that_does_not_exist(live_server, platform, queued):
    wrong = push(live_server, "platform", body_of("a1"), secret="guessed")
    unsigned = requests.post(f"{live_server.url}/api/v1/gitops/sources/platform/webhook/", timeout=30)
    missing = push(live_server, "nowhere", body_of("a1"), secret="guessed")

    def shape(answer: requests.Response, name: str) -> dict[str, str]:
        """The problem with the name the caller asked for taken out of it."""
        return {k: str(v).replace(name, "NAME") for k, v in answer.json().items()}

    assert wrong.status_code == unsigned.status_code == missing.status_code == 404
    assert shape(wrong, "platform") == shape(unsigned, "platform") == shape(missing, "nowhere")
    assert queued == []


def test_a_delivery_is_accepted_once_and_a_replay_queues_nothing(live_server, platform, queued):
    first = push(live_server, "platform", body_of("a1"), **{"X-GitHub-Delivery": "d-1"})
    again = push(live_server, "platform", body_of("a1"), **{"X-GitHub-Delivery": "d-1"})
    renamed = push(live_server, "platform", body_of("a1"), **{"X-GitHub-Delivery": "d-2"})  # id is not signed
    reused_id = push(live_server, "platform", body_of("b2"), **{"X-GitHub-Delivery": "d-1"})
    next_push = push(live_server, "platform", body_of("b2"), **{"X-GitHub-Delivery": "d-3"})

    assert [r.status_code for r in (first, again, renamed, reused_id, next_push)] == [202, 409, 409, 409, 202]
    assert "received before" in again.json()["detail"]
    assert queued == [("gitops.sync_source", (platform.pk,))] * 2


def test_deliveries_are_forgotten_after_the_replay_window(platform, settings):
    from gitops.models import WebhookDelivery  # here: the other tests stand on the code before issue 24 too

    settings.GITOPS_WEBHOOK_REPLAY_WINDOW = 3600
    assert services.record_delivery(platform, {}, b"one")
    assert not services.record_delivery(platform, {}, b"one")

    assert services.forget_deliveries(now=timezone.now() + timedelta(minutes=59)) == 0
    assert services.forget_deliveries(now=timezone.now() + timedelta(minutes=61)) == 1
    assert not WebhookDelivery.objects.exists()
