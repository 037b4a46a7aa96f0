"""Real git repositories for the tests: a work tree the test commits to, served over file:// or over a local
smart-HTTP server (`git http-backend` behind HTTP basic authentication)."""

from __future__ import annotations

import base64
import os
import subprocess
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Platform Team",
    "GIT_AUTHOR_EMAIL": "platform@example.com",
    "GIT_COMMITTER_NAME": "Platform Team",
    "GIT_COMMITTER_EMAIL": "platform@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}


class Repo:
    """A git work tree on branch main; `commit` writes (or, for None, deletes) files and commits them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True)
        self.git("init", "--quiet", "--initial-branch=main")

    def git(self, *args: str) -> str:
        env = {**os.environ, **GIT_ENV}
        return subprocess.run(
            ["git", *args], cwd=self.path, env=env, check=True, capture_output=True, text=True
        ).stdout

    def commit(self, message: str, files: dict[str, str | None]) -> str:
        for name, text in files.items():
            target = self.path / name
            if text is None:
                self.git("rm", "--quiet", name)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(textwrap.dedent(text))
            self.git("add", name)
        self.git("commit", "--quiet", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD").strip()

    @property
    def url(self) -> str:
        return f"file://{self.path}"


class _Handler(BaseHTTPRequestHandler):
    root: Path
    credentials: str

    def log_message(self, *args: object) -> None:
        pass

    def _serve(self) -> None:
        expected = "Basic " + base64.b64encode(self.credentials.encode()).decode()
        if self.headers.get("Authorization") != expected:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        env = {
            "PATH": os.environ["PATH"],
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": self.credentials.split(":")[0],
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
        }
        done = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, check=False)
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        headers = [line.split(": ", 1) for line in head.decode().split("\r\n") if ": " in line]
        status = next((int(v.split()[0]) for k, v in headers if k.lower() == "status"), 200)
        self.send_response(status)
        for key, value in headers:
            if key.lower() != "status":
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _serve


@contextmanager
def smart_http(root: Path, credentials: str) -> Iterator[str]:
    """Serve the repositories under `root` at http://127.0.0.1:<port>/ with `git http-backend`; every
    request needs HTTP basic authentication with `credentials` ("user:password")."""
    handler = type("Handler", (_Handler,), {"root": root, "credentials": credentials})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
