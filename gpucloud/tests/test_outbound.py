"""The one guarded outbound check: which addresses a request to a URL someone else chose may reach.

Budget webhooks (billing/tests/test_webhooks.py) and GitOps sources (gitops/tests/test_source_addresses.py)
use it through the API; here are its rules.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_address, ip_network

import pytest

from gpucloud import outbound


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
def test_only_public_addresses_are_allowed(address, kind):
    assert outbound.refusal(ip_address(address)) == kind


def test_an_operator_can_allow_a_private_network_and_nothing_more():
    allowed = [ip_network("10.20.0.0/16")]
    assert outbound.refusal(ip_address("10.20.1.2"), allowed) is None
    assert outbound.refusal(ip_address("::ffff:10.20.1.2"), allowed) is None
    assert outbound.refusal(ip_address("10.21.1.2"), allowed) == "private"


POLICY = outbound.Policy(
    what="thing", field="url", schemes=("https",), allowed_networks=(), networks_setting="GPUCLOUD_X"
)


@pytest.mark.parametrize(
    ("url", "error", "says"),
    [
        ("http://93.184.215.14/", outbound.Refused, "a thing must use https, not 'http'"),
        ("https://localhost/", outbound.Refused, "resolves to 127.0.0.1, a loopback address"),
        (
            "https://nowhere.invalid/",
            outbound.HostUnresolved,
            "the thing host 'nowhere.invalid' does not resolve",
        ),
        ("https:///x", outbound.Refused, "the thing URL has no host"),
    ],
)
def test_a_refusal_names_the_policys_field_and_says_why(url, error, says):
    with pytest.raises(error) as refusal:
        outbound.destination(url, POLICY)
    assert says in refusal.value.errors["url"][0]


@pytest.fixture
def receiver():
    """A local HTTP server that records the Host header of each POST and answers 204 (302 for /moved)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append(self.headers["Host"])
            self.send_response(302 if self.path == "/moved" else 204)
            self.send_header("Location", "http://169.254.169.254/")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], seen
    server.shutdown()
    server.server_close()


def test_a_request_goes_to_the_checked_address_whatever_the_name_resolves_to_later(receiver):
    port, seen = receiver
    # The name resolves nowhere now: only the address checked earlier is used, never a second look-up.
    where = outbound.Destination("http", "rebound.invalid", port, "/hook", ("127.0.0.1",))

    assert outbound.post(where, b"{}", content_type="application/json", timeout=5) == 204
    assert seen == [f"rebound.invalid:{port}"]


def test_a_redirect_is_answered_not_followed(receiver):
    port, seen = receiver
    where = outbound.Destination("http", "hooks.example", port, "/moved", ("127.0.0.1",))

    assert outbound.post(where, b"{}", content_type="application/json", timeout=5) == 302
    assert len(seen) == 1
