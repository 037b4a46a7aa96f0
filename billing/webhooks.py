"""Budget alert webhooks: where they may point, and how they are sent.

A webhook is a request the server makes on a tenant's behalf, so it must never reach what only the server can
reach (the cloud's metadata service, loopback, the private network). A destination is checked when it is
saved and again when it is sent: the host is resolved, every address it resolves to must be public (or inside
an operator's `GPUCLOUD_WEBHOOK_ALLOWED_NETWORKS`), and the request connects to the very address that was
checked, so a name that resolves differently a second later (DNS rebinding) cannot slip through. Redirects are
not followed. Only https is allowed unless the operator sets `GPUCLOUD_WEBHOOK_ALLOW_HTTP`.

The URL is kept encrypted at rest (`gpucloud.crypto`): it often carries a secret (Slack's and Teams' do).
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import logging
import socket
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from gpucloud import crypto
from gpucloud.errors import ValidationFailed

log = logging.getLogger(__name__)

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
# Checked in this order, so an address gets the most telling name (127.0.0.1 is "loopback", not "private").
REFUSED_KINDS = (
    ("loopback", "is_loopback"),
    ("link-local", "is_link_local"),
    ("multicast", "is_multicast"),
    ("unspecified", "is_unspecified"),
    ("reserved", "is_reserved"),
    ("private", "is_private"),
)


@dataclass(frozen=True)
class Destination:
    """A checked webhook URL: its parts, and the addresses its host resolved to (each one allowed)."""

    scheme: str
    host: str
    port: int
    target: str  # path and query
    addresses: tuple[str, ...]


def refusal(address: Address) -> str | None:
    """Why a webhook may not go to `address` (a kind of non-public address), or None if it may."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:169.254.169.254 is 169.254.169.254
    if any(address in network for network in settings.WEBHOOK_ALLOWED_NETWORKS):
        return None
    for kind, attribute in REFUSED_KINDS:
        if getattr(address, attribute):
            return kind
    return None if address.is_global else "not public"


def _refuse(message: str) -> ValidationFailed:
    return ValidationFailed.on("webhook_url", message)


def destination(url: str) -> Destination:
    """Parse, resolve and check `url`; raises ValidationFailed saying what is wrong and what is allowed."""
    parts = urlsplit(url)
    schemes = ("https", "http") if settings.WEBHOOK_ALLOW_HTTP else ("https",)
    if parts.scheme not in schemes:
        raise _refuse(
            f"a webhook must use {' or '.join(schemes)}, not {parts.scheme or 'no scheme'!r}"
            + (
                ""
                if settings.WEBHOOK_ALLOW_HTTP
                else " (an operator may allow http: GPUCLOUD_WEBHOOK_ALLOW_HTTP)"
            )
        )
    try:
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise _refuse("the webhook URL's port is not a number from 1 to 65535") from None
    if not host:
        raise _refuse("the webhook URL has no host")
    try:
        resolved = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise _refuse(f"the webhook host {host!r} does not resolve ({exc})") from None
    addresses = tuple(dict.fromkeys(str(info[4][0]) for info in resolved))
    for text in addresses:
        kind = refusal(ipaddress.ip_address(text.split("%")[0]))
        if kind is not None:
            raise _refuse(
                f"the webhook host {host!r} resolves to {text}, a {kind} address: webhooks go only to public "
                "addresses (an operator may allow networks with GPUCLOUD_WEBHOOK_ALLOWED_NETWORKS)"
            )
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Destination(parts.scheme, host, port, target, addresses)


def seal(url: str) -> str:
    """Check a webhook URL being saved (see `destination`) and encrypt it; "" stays "" (no webhook)."""
    if not url:
        return ""
    destination(url)
    return crypto.encrypt(url)


class _PinnedHTTP(http.client.HTTPConnection):
    """Plain HTTP to one checked address; the Host header still names the URL's host."""

    def __init__(self, where: Destination, address: str, timeout: float) -> None:
        super().__init__(where.host, where.port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """TLS to one checked address, verifying the certificate against the URL's host name."""

    def __init__(self, where: Destination, address: str, timeout: float) -> None:
        self.tls = ssl.create_default_context()
        super().__init__(where.host, where.port, timeout=timeout, context=self.tls)
        self.address = address

    def connect(self) -> None:
        raw = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self.tls.wrap_socket(raw, server_hostname=self.host)


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
    body = json.dumps(payload).encode()
    connection_class = _PinnedHTTPS if where.scheme == "https" else _PinnedHTTP
    error = ""
    for address in where.addresses:
        connection = connection_class(where, address, settings.BILLING_WEBHOOK_TIMEOUT)
        try:
            connection.request("POST", where.target, body=body, headers={"Content-Type": "application/json"})
            status = connection.getresponse().status
        except OSError as exc:  # this address failed: try the next one the host resolved to
            error = str(exc)
            continue
        finally:
            connection.close()
        if 200 <= status < 300:
            return True
        error = f"answered {status}" + (" (redirects are not followed)" if 300 <= status < 400 else "")
        break
    log.warning("budget webhook failed", extra={"host": where.host, "error": error})
    return False
