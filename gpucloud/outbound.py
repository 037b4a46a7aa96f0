"""Requests the server makes to a URL someone else chose: where they may go, and how they are sent.

Such a request must never reach what only the server can reach (the cloud's metadata service, loopback, the
private network). A URL is checked when it is saved and again when it is used: the host is resolved, every
address it resolves to must be public (or inside the networks the operator allows for that use), and the
request then connects to the very addresses that were checked, so a name that resolves differently a second
later (DNS rebinding) cannot slip through. Redirects are not followed.

One check, several users, each with its own `Policy`: budget webhooks (`billing.webhooks`, sent by the pinned
connections below) and GitOps sources (`gitops.git`, whose `git fetch` is pinned to the checked addresses
with `http.curloptResolve`).
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from gpucloud.errors import ValidationFailed

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
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
class Policy:
    """Where one kind of outbound request may go, and how a refusal names it."""

    what: str  # "webhook", "git source": the refusals say "the webhook host …"
    field: str  # the input field a refusal names
    schemes: tuple[str, ...]
    allowed_networks: Sequence[Network]
    networks_setting: str  # the setting an operator allows more networks with
    scheme_hint: str = ""  # added to a refused scheme, e.g. the setting that allows http


@dataclass(frozen=True)
class Destination:
    """A checked URL: its parts, and the addresses its host resolved to (each one allowed)."""

    scheme: str
    host: str
    port: int
    target: str  # path and query
    addresses: tuple[str, ...]


class Refused(ValidationFailed):
    """A URL that may not be used: the field error says why and what is allowed."""


class HostUnresolved(Refused):
    """The URL's host does not resolve (now): nothing can be reached, nothing was checked."""


def refusal(address: Address, allowed_networks: Sequence[Network] = ()) -> str | None:
    """Why a request may not go to `address` (a kind of non-public address), or None if it may."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:169.254.169.254 is 169.254.169.254
    if any(address in network for network in allowed_networks):
        return None
    for kind, attribute in REFUSED_KINDS:
        if getattr(address, attribute):
            return kind
    return None if address.is_global else "not public"


def destination(url: str, policy: Policy) -> Destination:
    """Parse, resolve and check `url`; raises `Refused` (`HostUnresolved` for a name that does not resolve)
    saying what is wrong and what is allowed."""
    parts = urlsplit(url)
    what = policy.what
    if parts.scheme not in policy.schemes:
        raise Refused.on(
            policy.field,
            f"a {what} must use {' or '.join(policy.schemes)}, not {parts.scheme or 'no scheme'!r}"
            + policy.scheme_hint,
        )
    try:
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise Refused.on(policy.field, f"the {what} URL's port is not a number from 1 to 65535") from None
    if not host:
        raise Refused.on(policy.field, f"the {what} URL has no host")
    try:
        resolved = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise HostUnresolved.on(policy.field, f"the {what} host {host!r} does not resolve ({exc})") from None
    addresses = tuple(dict.fromkeys(str(info[4][0]) for info in resolved))
    for text in addresses:
        kind = refusal(ipaddress.ip_address(text.split("%")[0]), policy.allowed_networks)
        if kind is not None:
            raise Refused.on(
                policy.field,
                f"the {what} host {host!r} resolves to {text}, a {kind} address: {what}s go only to public "
                f"addresses (an operator may allow networks with {policy.networks_setting})",
            )
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Destination(parts.scheme, host, port, target, addresses)


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


def post(where: Destination, body: bytes, *, content_type: str, timeout: float) -> int:
    """POST `body` to a checked destination, connecting only to its checked addresses (the next one when
    one cannot be reached); returns the HTTP status of the first that answers. Redirects are not followed.
    Raises OSError when none could be reached."""
    connection_class = _PinnedHTTPS if where.scheme == "https" else _PinnedHTTP
    failure: OSError = OSError(f"{where.host} resolved to no address")
    for address in where.addresses:
        connection = connection_class(where, address, timeout)
        try:
            connection.request("POST", where.target, body=body, headers={"Content-Type": content_type})
            return connection.getresponse().status
        except OSError as exc:  # this address failed: try the next one the host resolved to
            failure = exc
        finally:
            connection.close()
    raise failure
