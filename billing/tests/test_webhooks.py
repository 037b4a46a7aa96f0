"""Budget webhooks go only to public https destinations, checked when saved and again when sent.

Which addresses are public is `gpucloud.outbound`'s, tested in gpucloud/tests/test_outbound.py."""

from __future__ import annotations

import pytest

from billing.models import Budget
from billing.services.budgets import set_budget
from core.audit import Actor
from gpucloud.errors import ValidationFailed

ADMIN = Actor.console("tests")
PAYLOAD = {"tenant": "tenant-a", "threshold_percent": 50}


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://169.254.169.254/latest/meta-data/", "must use https"),
        ("https://169.254.169.254/latest/meta-data/", "a link-local address"),
        ("https://127.0.0.1:8299/hook", "a loopback address"),
        ("https://localhost:8299/hook", "a loopback address"),  # a name is resolved and every address checked
        ("https://[::ffff:127.0.0.1]/hook", "a loopback address"),
        ("https://[::1]/hook", "a loopback address"),
        ("https://10.0.0.5/hook", "a private address"),
        ("https://hooks.invalid/hook", "does not resolve"),
        ("https://93.184.215.14:99999/hook", "port"),
        ("ftp://93.184.215.14/hook", "must use https"),
    ],
)
def test_the_api_refuses_internal_or_plain_http_destinations(api, people, url, says):
    answer = api(people["alice"]).post(
        "/api/v1/budgets/", {"tenant": "tenant-a", "monthly_amount": "100", "webhook_url": url}, format="json"
    )

    assert answer.status_code == 400, answer.json()
    assert answer["Content-Type"] == "application/problem+json"
    assert says in answer.json()["errors"]["webhook_url"][0]
    assert not Budget.objects.exists()


def test_a_public_https_destination_is_saved_encrypted_and_shown_without_its_secret(api, people):
    url = "https://93.184.215.14/services/T000/B000/s3cr3t-hook-token"
    answer = api(people["alice"]).post(
        "/api/v1/budgets/", {"tenant": "tenant-a", "monthly_amount": "100", "webhook_url": url}, format="json"
    )

    assert answer.status_code == 201, answer.json()
    assert answer.json()["webhook_url"] == "https://93.184.215.14/…"
    budget = Budget.objects.get()
    assert budget.webhook_url == url
    assert "s3cr3t" not in budget.webhook_url_ciphertext


def test_a_stored_internal_destination_is_refused_without_an_allow_list(people, settings):
    with pytest.raises(ValidationFailed, match="loopback"):
        set_budget(
            actor=ADMIN, tenant=people["a"], monthly_amount="10", webhook_url="https://127.0.0.1:8299/x"
        )
