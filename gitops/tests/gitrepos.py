"""Real git repositories for the tests: a work tree the test commits to, served over file:// or over a local
smart-HTTP server (`git http-backend`, behind HTTP basic authentication, over TLS with a certificate of its
own when asked)."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import ssl
import subprocess
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from core.audit import Actor
from gitops import services
from gitops.models import GitSource

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

    def commit_bytes(self, message: str, files: dict[str, bytes]) -> str:
        """Write the files as given (no dedent, any bytes, many at once: one `git add`) and commit them."""
        for name, data in files.items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        self.git("add", "--all")
        self.git("commit", "--quiet", "-m", message)
        return self.git("rev-parse", "HEAD").strip()

    @property
    def url(self) -> str:
        return f"file://{self.path}"


def declare_tenant(repo: Repo, manifest: str, **source: str) -> GitSource:
    """Commit one tenant's manifest to `tenants/vision.yaml`, register `repo` as the GitOps source `platform`
    reading `tenants/`, sync it and return the synced source (`source`: more of create_source's fields)."""
    repo.commit("vision", {"tenants/vision.yaml": manifest})
    row = services.create_source(
        actor=Actor.console("test"), name="platform", url=repo.url, path="tenants", **source
    )
    assert services.sync(row).state == "synced"
    return row


@dataclass
class Served:
    """A running smart-HTTP server: its base URL, the paths it was asked for, the CA that signs it (https)."""

    url: str
    requests: list[str] = field(default_factory=list)
    ca_file: Path | None = None
    hold: threading.Event | None = None  # set: every request waits for it (a server that does not answer)


def self_signed(directory: Path, names: tuple[str, ...]) -> tuple[Path, Path]:
    """A self-signed certificate (its own CA) for the host `names` (addresses or DNS names), and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    alternatives: list[x509.GeneralName] = []
    for name in names:
        try:
            alternatives.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alternatives.append(x509.DNSName(name))
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = directory / "server.pem", directory / "server.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_file, key_file


class _Handler(BaseHTTPRequestHandler):
    root: Path
    credentials: str
    served: Served

    def log_message(self, *args: object) -> None:
        pass

    def _serve(self) -> None:
        self.served.requests.append(self.path)
        if self.served.hold is not None:
            self.served.hold.wait(timeout=30)
        expected = "Basic " + base64.b64encode(self.credentials.encode()).decode()
        if self.credentials and self.headers.get("Authorization") != expected:
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
def smart_http(
    root: Path,
    credentials: str = "",
    *,
    tls_dir: Path | None = None,
    names: tuple[str, ...] = ("127.0.0.1",),
    hold: threading.Event | None = None,
) -> Iterator[Served]:
    """Serve the repositories under `root` at http://127.0.0.1:<port>/ with `git http-backend`. With
    `credentials` ("user:password") every request needs HTTP basic authentication; with `tls_dir` it is
    https, with a self-signed certificate for `names` written there (`Served.ca_file`)."""
    served = Served("", hold=hold)
    handler = type("Handler", (_Handler,), {"root": root, "credentials": credentials, "served": served})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    scheme = "http"
    if tls_dir is not None:
        cert_file, key_file = self_signed(tls_dir, names)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme, served.ca_file = "https", cert_file
    served.url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        if hold is not None:
            hold.set()
        server.shutdown()
        server.server_close()
