"""A thin, counted, retrying transport over the official `kubernetes` client.

The driver speaks raw REST through `ApiClient.param_serialize` / `call_api` rather than the generated
typed APIs: manifests stay plain dicts end to end, lists are parsed once with `json.loads`, and every
request passes through one place that counts it, retries it and classifies its failure.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import urllib3
import yaml
from kubernetes import client, config

from gpucloud import kubeconfig as kubeconfig_rules
from gpucloud.kube.errors import PermanentDriverError, TemporaryDriverError

TEMPORARY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
APPLY = "application/apply-patch+yaml"
FIELD_MANAGER = "gpucloud"


class ApiStatusError(PermanentDriverError):
    """A permanent answer from the API server, with its HTTP status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class NotFound(ApiStatusError):
    """404: the object, or the whole resource type (a missing CRD), does not exist."""


class Conflict(ApiStatusError):
    """409 to a write with a `resourceVersion` precondition: the object moved on; read it again."""


class Gone(ApiStatusError):
    """410: the resourceVersion a watch started from is too old (compacted); list again."""


class WatchBroken(TemporaryDriverError):
    """A watch stream that could not be opened or was cut; reconnect from the last resourceVersion seen."""


class RetriesExhausted(TemporaryDriverError):
    """A temporary failure that outlasted the bounded retries of one request."""


@dataclass
class RetryPolicy:
    """Bounded retries with exponential backoff and full jitter (AWS architecture blog's variant)."""

    attempts: int = 4
    base_seconds: float = 0.05
    cap_seconds: float = 1.0
    timeout_seconds: float = 10.0  # per request (connect and read)

    def delay(self, attempt: int, rng: random.Random) -> float:
        return rng.uniform(0, min(self.cap_seconds, self.base_seconds * 2**attempt))


def api_client_from_kubeconfig(kubeconfig: str, *, context: str | None = None) -> client.ApiClient:
    """An ApiClient for the cluster a kubeconfig (as text) names.

    The text is parsed in memory and never logged. Only a server and inline credentials are accepted
    (`gpucloud.kubeconfig.check`, raising `KubeconfigRefused`): the client would otherwise run the file's
    `exec` commands and read the files it names. urllib3's own retries are switched off: the driver
    retries, counts and classifies every attempt itself.
    """
    document = yaml.safe_load(kubeconfig)
    kubeconfig_rules.check(document)
    configuration = client.Configuration()
    config.load_kube_config_from_dict(
        document, context=context, client_configuration=configuration, persist_config=False
    )
    configuration.retries = False
    return client.ApiClient(configuration)


def api_client_for_url(url: str) -> client.ApiClient:
    """An ApiClient for an unauthenticated endpoint, such as the emulator on loopback."""
    configuration = client.Configuration()
    configuration.host = url
    configuration.retries = False
    return client.ApiClient(configuration)


def _message(exc: client.ApiException) -> str:
    """The API server's own message from its Status body, falling back to the HTTP reason."""
    try:
        message = json.loads(exc.body or "").get("message")
    except (ValueError, AttributeError):
        message = None
    return str(message or exc.reason or exc.status)


class KubeApi:
    """Counts, retries and classifies the requests of one driver."""

    def __init__(
        self,
        api_client: client.ApiClient,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        seed: int | None = None,
    ) -> None:
        self.api_client = api_client
        self.retry = retry or RetryPolicy()
        self.sleep = sleep
        self.rng = random.Random(seed)
        self.calls = 0
        self.writes = 0

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str | None = None,
        conditional: bool = False,
    ) -> Any:
        """One logical request: retried on temporary failures, raising a DriverError otherwise.

        `conditional`: the body carries a `resourceVersion` precondition, so a 409 is final (`Conflict`):
        sending the same body again cannot succeed; the caller reads the object again and recomputes.
        """
        last: Exception | None = None
        for attempt in range(self.retry.attempts):
            if attempt:
                self.sleep(self.retry.delay(attempt, self.rng))
            try:
                return self._once(method, path, query, body, content_type)
            except client.ApiException as exc:
                if conditional and exc.status == 409:
                    raise Conflict(409, _message(exc)) from None
                if exc.status not in TEMPORARY_STATUSES and not (exc.status or 0) >= 500:
                    raise self._permanent(exc) from None
                last = exc
            except (urllib3.exceptions.HTTPError, OSError) as exc:  # timeouts, refused, reset
                last = exc
        raise RetriesExhausted(
            f"{method} {path}: {self._describe(last)} (after {self.retry.attempts} attempts)"
        )

    def _once(
        self, method: str, path: str, query: dict[str, str] | None, body: Any, content_type: str | None
    ) -> Any:
        self.calls += 1
        if method in WRITE_METHODS:
            self.writes += 1
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        url_path = f"{path}?{urlencode(query)}" if query else path
        serialized = self.api_client.param_serialize(
            method, url_path, header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        response = self.api_client.call_api(*serialized, _request_timeout=self.retry.timeout_seconds)
        data = response.read()
        if not 200 <= response.status <= 299:
            raise client.ApiException(http_resp=response)
        return json.loads(data) if data else None

    @staticmethod
    def _permanent(exc: client.ApiException) -> ApiStatusError:
        status = int(exc.status or 0)
        if status == 404:
            return NotFound(404, _message(exc))
        if status == 401:
            return ApiStatusError(401, f"unauthorised: {_message(exc)} (is the kubeconfig expired?)")
        return ApiStatusError(status, _message(exc))

    @staticmethod
    def _describe(exc: Exception | None) -> str:
        if isinstance(exc, client.ApiException):
            return f"HTTP {exc.status}: {_message(exc)}"
        return type(exc).__name__ if exc is not None else "no attempt made"

    def watch(
        self, path: str, *, resource_version: str, timeout_seconds: int, query: dict[str, str] | None = None
    ) -> Iterator[dict[str, Any]]:
        """The events (`{"type", "object"}`) of one watch of a collection from `resource_version`, until the
        server ends the stream (after `timeout_seconds`). Raises `Gone` when that version is too old (an
        `ERROR` event or an HTTP 410), `WatchBroken` when the connection fails or is cut; the caller
        reconnects (from the last version it saw) or lists again. Not retried here: a watch is a stream."""
        params = {
            **(query or {}),
            "watch": "1",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
            "allowWatchBookmarks": "true",
        }
        self.calls += 1
        serialized = self.api_client.param_serialize(
            "GET",
            f"{path}?{urlencode(params)}",
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        try:
            # Connecting is bounded as for any request; reading waits a little longer than the server's end.
            timeout = (self.retry.timeout_seconds, timeout_seconds + self.retry.timeout_seconds)
            response = self.api_client.call_api(*serialized, _request_timeout=timeout).response
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise WatchBroken(f"watch {path}: {type(exc).__name__}") from None
        try:
            if response.status == 410:
                raise Gone(410, f"watch {path}: resourceVersion {resource_version} is too old")
            if not 200 <= response.status <= 299:
                raise self._permanent(client.ApiException(status=response.status, reason=response.reason))
            yield from self._events(path, response)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise WatchBroken(f"watch {path} was cut: {type(exc).__name__}") from None
        finally:
            response.release_conn()

    @staticmethod
    def _events(path: str, response: Any) -> Iterator[dict[str, Any]]:
        pending = b""
        for chunk in response.stream(amt=None, decode_content=True):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    if status.get("code") == 410:
                        raise Gone(410, f"watch {path}: {status.get('message', 'too old')}")
                    raise ApiStatusError(int(status.get("code") or 500), str(status.get("message")))
                yield event

    # --- verbs ----------------------------------------------------------------------------------

    def get(self, path: str, query: dict[str, str] | None = None) -> Any:
        return self.request("GET", path, query=query)

    def apply(self, path: str, manifest: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply, taking ownership of every field gpucloud sets; the object as it is now."""
        applied: dict[str, Any] = self.request(
            "PATCH",
            path,
            query={"fieldManager": FIELD_MANAGER, "force": "true"},
            body=manifest,
            content_type=APPLY,
        )
        return applied

    def delete(self, path: str) -> bool:
        """Delete in the background (dependents are garbage-collected); False when it was already gone."""
        try:
            self.request("DELETE", path, body={"propagationPolicy": "Background"})
        except NotFound:
            return False
        return True
