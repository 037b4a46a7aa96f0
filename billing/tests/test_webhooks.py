"""Budget webhooks go only to public https destinations, checked when saved and again when sent."""

from __future__ import annotations

from ipaddress import ip_address, ip_network

import pytest

from billing import webhooks
from billing.models import Budget
from billing.services.budgets import set_budget
from gpucloud.errors import ValidationFailed
from tenants.audit import Actor

ADMIN = Actor.console("tests")
PAYLOAD = {"tenant": "tenant-a", "threshold_percent": 50}


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("169.254.169.254", "link-local"),
        ("127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "not public"),  # carrier-grade NAT
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("::1", "loopback"),
        ("fe80::1", "link-local"),
        ("fd00::1", "private"),
        ("::", "unspecified"),
        ("ff02::1", "multicast"),
        ("::ffff:169.254.169.254", "link-local"),  # IPv4-mapped: the IPv4 address is what is reached
        ("::ffff:10.0.0.1", "private"),
        ("93.184.215.14", None),
        ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", None),
    ],
)
def test_only_public_addresses_are_allowed(address, kind, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    assert webhooks.refusal(ip_address(address)) == kind


def test_an_operator_can_allow_a_private_network_and_nothing_more(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = [ip_network("10.20.0.0/16")]
    assert webhooks.refusal(ip_address("10.20.1.2")) is None
    assert webhooks.refusal(ip_address("::ffff:10.20.1.2")) is None
    assert webhooks.refusal(ip_address("10.21.1.2")) == "private"


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
    assert budget.webhook_url == url and "s3cr3t" not in budget.webhook_url_ciphertext


def test_a_stored_internal_destination_is_refused_without_an_allow_list(people, settings):
    with pytest.raises(ValidationFailed, match="loopback"):
        set_budget(
            actor=ADMIN, tenant=people["a"], monthly_amount="10", webhook_url="https://127.0.0.1:8299/x"
        )
