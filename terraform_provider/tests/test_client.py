"""The provider's client: API refusals carry the API's words, and a server that ignored a dry run is named."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from terraform_provider.client import ApiError, Client


class OlderGpucloud(BaseHTTPRequestHandler):
    """A gpucloud from before dry runs: it ignores `?dry_run=true` and does the write."""

    writes: list[str] = []

    def do_POST(self) -> None:
        OlderGpucloud.writes.append(self.path)
        body = json.dumps({"slug": "vision", "state": "pending"}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def older_gpucloud() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), OlderGpucloud)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_dry_run_a_server_carried_out_is_reported_not_taken_as_a_yes(older_gpucloud: str) -> None:
    with pytest.raises(ApiError) as refused:
        Client(older_gpucloud, "gpc_x").dry_run("POST", "/api/v1/tenants/", {"slug": "vision"})
    assert refused.value.problem["title"] == "this gpucloud does not support dry runs"
    assert "POST /api/v1/tenants/ was carried out while planning" in refused.value.message
    assert OlderGpucloud.writes == ["/api/v1/tenants/?dry_run=true"]


def test_a_problem_becomes_the_apis_detail_with_the_fields_it_names() -> None:
    error = ApiError(
        400, {"title": "The request is not valid", "detail": "slug: bad", "errors": {"x": ["y"]}}
    )
    assert error.message == "slug: bad\nx: y"
    assert error.summary == "gpucloud API: The request is not valid (400)"
