"""A small client for gpucloud's REST API: one session, problem+json errors turned into ApiError."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import requests

TIMEOUT = 30  # seconds per request; waiting for a tenant is the resource's loop, not one long request


class ApiError(Exception):
    """A 4xx/5xx answer: `message` is the API's own detail, with the fields it names."""

    def __init__(self, status: int, problem: dict[str, Any]):
        self.status = status
        self.problem = problem
        super().__init__(self.message)

    @property
    def message(self) -> str:
        detail = str(self.problem.get("detail") or self.problem.get("title") or f"HTTP {self.status}")
        errors = self.problem.get("errors") or {}
        named = [
            f"{field}: {'; '.join(map(str, why))}" for field, why in errors.items() if isinstance(why, list)
        ]
        extra = [line for line in named if line.split(": ", 1)[1] not in detail]
        return "\n".join([detail, *extra])

    @property
    def summary(self) -> str:
        return f"gpucloud API: {self.problem.get('title') or 'request refused'} ({self.status})"


def path(*parts: str) -> str:
    """`/api/v1/` joined with each part quoted: a slug or username never escapes its segment."""
    return "/api/v1/" + "".join(quote(part, safe="") + "/" for part in parts)


class Client:
    def __init__(self, endpoint: str, token: str):
        self.endpoint = endpoint.rstrip("/")
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.session.headers["User-Agent"] = "terraform-provider-gpucloud"

    def send(self, method: str, url: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
        """The answer, or ApiError for a 4xx/5xx with the API's problem."""
        response = self.session.request(
            method, self.endpoint + url, json=body, params=params, timeout=TIMEOUT
        )
        if response.status_code >= 400:
            try:
                problem = response.json()
            except ValueError:
                problem = {"detail": response.text[:500] or response.reason}
            raise ApiError(
                response.status_code, problem if isinstance(problem, dict) else {"detail": problem}
            )
        return response

    def request(self, method: str, url: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
        response = self.send(method, url, body, params)
        if response.status_code == 204 or not response.content:
            return None
        if "json" in response.headers.get("Content-Type", ""):
            return response.json()
        return response.text

    def dry_run(self, method: str, url: str, body: Any) -> None:
        """Ask whether the API would accept this write (raises ApiError if not); nothing is written."""
        response = self.send(method, url, body, params={"dry_run": "true"})
        if response.headers.get("Dry-Run") != "true":
            # A gpucloud without dry runs ignored the parameter and did it: say so, never hide it.
            raise ApiError(
                response.status_code,
                {
                    "title": "this gpucloud does not support dry runs",
                    "detail": f"{method} {url} was carried out while planning (gpucloud answered without "
                    "`Dry-Run: true`); upgrade gpucloud, and import what the plan created",
                },
            )

    def get(self, url: str, **params: Any) -> Any:
        return self.request("GET", url, params=params or None)

    def find(self, url: str) -> Any:
        """GET, or None when the object does not exist (404)."""
        try:
            return self.get(url)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def post(self, url: str, body: Any = None) -> Any:
        return self.request("POST", url, body)

    def put(self, url: str, body: Any) -> Any:
        return self.request("PUT", url, body)

    def patch(self, url: str, body: Any) -> Any:
        return self.request("PATCH", url, body)

    def delete(self, url: str) -> Any:
        try:
            return self.request("DELETE", url)
        except ApiError as exc:
            if exc.status == 404:  # already gone: what delete wanted
                return None
            raise
