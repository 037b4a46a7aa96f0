"""What gpucloud accepts in a kubeconfig: a server, and inline credentials only.

Given a kubeconfig, the official client runs `users[].user.exec` commands, runs `auth-provider` plug-ins
(gcp's `cmd-path` is a command; oidc's refresh posts to a URL the file names) and reads `tokenFile`,
`client-certificate`, `client-key` and `certificate-authority` from the local disk. A kubeconfig handed to
gpucloud comes from someone else, so each of those would run a command, or read a file, of gpucloud's server
as its user, and send what it read to a server the file chose. Every kubeconfig the product reads
(registration, the stored one of each host cluster, a vCluster's admin kubeconfig, the CLI) passes `check`
before the client sees it: `gpucloud.kube.api.api_client_from_kubeconfig`, the one loader, calls it.

What a user may hold is listed, not what it may not: a key the client learns to read from disk in a later
version is refused until it is added here.
"""

from __future__ import annotations

from typing import Any

from gpucloud.errors import ServiceError

INLINE_USER = ("token", "client-certificate-data", "client-key-data", "username", "password", "extensions")
INLINE_CLUSTER = (
    "server",
    "certificate-authority-data",
    "insecure-skip-tls-verify",
    "tls-server-name",
    "proxy-url",
    "disable-compression",
    "extensions",
)
# Why a key is refused, for the keys people actually paste; any other unknown key gets the generic reason.
FILE = "names a file on gpucloud's server, which gpucloud never reads"
REASONS = {
    "exec": "runs a command on gpucloud's server, which gpucloud never does: put a token in `token` "
    "(e.g. from `kubectl create token` of a ServiceAccount) or a client certificate in "
    "`client-certificate-data` and `client-key-data`",
    "auth-provider": "runs a plug-in (a command, or a token refresh against a URL the file names), which "
    "gpucloud never does: put the token itself (an OpenID ID token too) in `token`, or a client certificate "
    "in `client-certificate-data` and `client-key-data`",
    "tokenFile": f"{FILE}: put the token itself in `token`",
    "client-certificate": f"{FILE}: put the certificate itself in `client-certificate-data` (base64 PEM)",
    "client-key": f"{FILE}: put the key itself in `client-key-data` (base64 PEM)",
    "certificate-authority": f"{FILE}: put the CA itself in `certificate-authority-data` (base64 PEM)",
}


class KubeconfigRefused(ServiceError):
    """A kubeconfig that asks gpucloud to run a command or read a file, or that is not a kubeconfig.

    `errors` names each offending field by its path in the document (`kubeconfig.users[0].user.exec`)."""

    status = 422
    type = "kubeconfig-refused"
    title = "The kubeconfig asks for something gpucloud does not do"


def check(document: Any, *, field: str = "kubeconfig") -> None:
    """Raise KubeconfigRefused naming every field of `document` (a parsed kubeconfig) that is not a server
    or an inline credential; return if there is none. `field` prefixes the paths (the request's field)."""
    problems: dict[str, list[str]] = {}
    if not isinstance(document, dict):
        problems[field] = ["a kubeconfig is a mapping with clusters, users and contexts"]
    else:
        for path, reason in _problems(document):
            problems[f"{field}.{path}"] = [reason]
    if problems:
        first, reasons = next(iter(problems.items()))
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise KubeconfigRefused(f"{first} {reasons[0]}{more}", errors=problems)


def _problems(document: dict[str, Any]) -> list[tuple[str, str]]:
    found = []
    for section, inner, allowed in (("users", "user", INLINE_USER), ("clusters", "cluster", INLINE_CLUSTER)):
        entries = document.get(section) or []
        if not isinstance(entries, list):
            found.append((section, f"is a list of {{name, {inner}}} entries"))
            continue
        for index, entry in enumerate(entries):
            where = f"{section}[{index}].{inner}"
            body = entry.get(inner) if isinstance(entry, dict) else None
            if not isinstance(body, dict):
                found.append((where, "is missing or not a mapping"))
                continue
            found += [(f"{where}.{key}", _reason(key, allowed)) for key in body if key not in allowed]
    return found


def _reason(key: Any, allowed: tuple[str, ...]) -> str:
    return REASONS.get(str(key)) or (
        f"is not something gpucloud reads from a kubeconfig; it reads {', '.join(allowed[:-1])} here"
    )
