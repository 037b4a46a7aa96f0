"""Fetching a branch with the real `git` and reading manifests out of a commit, without a working tree.

Each source has a bare repository under `GPUCLOUD_VAR_DIR/gitops/<name>.git`; a fetch moves
`refs/gitops/head` to the branch's newest commit. Credentials reach git through the environment
(`GIT_CONFIG_*` adds an `Authorization` header), never the command line, so no process listing shows them.
Only file://, http:// and https:// are allowed (`GIT_ALLOW_PROTOCOL`), and git never prompts.

An http(s) source goes through the one guarded outbound check (`gpucloud.outbound`): before each fetch its
host is resolved, every address must be public or in `GPUCLOUD_GITOPS_ALLOWED_NETWORKS`, and git connects to
those very addresses (`http.curloptResolve`), following no redirect. Credentials are never sent over http://.

What a sync reads is bounded (`Limits`, `Deadline`): the number of manifest files, the bytes of each and of
all, read from the tree's listing before any is read, and the time of the whole sync.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from django.conf import settings

from gitops.manifests import SUFFIXES, ManifestInvalid, Problem
from gpucloud import outbound
from gpucloud.errors import ValidationFailed

REF = "refs/gitops/head"
PROTOCOLS = "file:http:https"
CLEAR_TEXT = (
    "credentials are never sent over plain http:// (anyone on the way could read them): use an https:// URL, "
    "or remove the password"
)


class GitError(Exception):
    """git could not fetch or read: unreachable URL, refused credentials, unknown branch, timeout."""


class LimitExceeded(GitError):
    """A commit over one of the limits of a sync (files, bytes, time): nothing of it is applied."""


@dataclass(frozen=True)
class Limits:
    """What one sync reads at most (docs/configuration.md, GPUCLOUD_GITOPS_MAX_*)."""

    files: int
    file_bytes: int
    commit_bytes: int

    @classmethod
    def from_settings(cls) -> Limits:
        return cls(
            settings.GITOPS_MAX_FILES, settings.GITOPS_MAX_FILE_BYTES, settings.GITOPS_MAX_COMMIT_BYTES
        )


class Deadline:
    """The end of a sync's time (`GPUCLOUD_GITOPS_SYNC_TIMEOUT`): each step gets what is left of it."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.clock = clock
        self.at = clock() + seconds

    def remaining(self) -> float:
        return self.at - self.clock()

    def check(self, step: str) -> None:
        if self.remaining() <= 0:
            raise LimitExceeded(
                f"the sync took longer than {self.seconds:g} s (GPUCLOUD_GITOPS_SYNC_TIMEOUT) while {step}; "
                "nothing was applied"
            )


def repository_dir(name: str) -> Path:
    return Path(settings.VAR_DIR) / "gitops" / f"{name}.git"


def policy() -> outbound.Policy:
    """Where http(s) sources may point (read at each use: the settings may change under tests)."""
    return outbound.Policy(
        what="git source",
        field="url",
        schemes=("https", "http"),
        allowed_networks=settings.GITOPS_ALLOWED_NETWORKS,
        networks_setting="GPUCLOUD_GITOPS_ALLOWED_NETWORKS",
    )


def check_url(url: str, *, has_password: bool) -> outbound.Destination | None:
    """Check an http(s) source URL, when it is saved and before each fetch: no credentials over http://, and
    every address its host resolves to public or allowed. None for a file:// URL (checked by the caller).
    Raises ValidationFailed (`outbound.HostUnresolved` for a name that does not resolve now)."""
    scheme = urlsplit(url).scheme
    if scheme not in ("http", "https"):
        return None
    if scheme == "http" and has_password:
        raise ValidationFailed.on("url", CLEAR_TEXT)
    return outbound.destination(url, policy())


def _resolve_entry(where: outbound.Destination) -> str | None:
    """curl's `--resolve` entry pinning the checked addresses (None for an address written in the URL)."""
    try:
        ipaddress.ip_address(where.host)
        return None
    except ValueError:
        pass
    addresses = ",".join(f"[{a}]" if ":" in a else a for a in where.addresses)
    return f"{where.host}:{where.port}:{addresses}"


def _environment(username: str, password: str, where: outbound.Destination | None = None) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(Path(settings.VAR_DIR) / "gitops"),  # no user's ~/.gitconfig or credential helpers
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "",
        "SSH_ASKPASS": "",
        "GIT_ALLOW_PROTOCOL": PROTOCOLS,
        "LC_ALL": "C",
    }
    # A redirect would lead git to an address nobody checked.
    config = [("http.followRedirects", "false")]
    if where is not None and (entry := _resolve_entry(where)):
        config.append(("http.curloptResolve", entry))
    if settings.GITOPS_CA_FILE:
        config.append(("http.sslCAInfo", settings.GITOPS_CA_FILE))
    if password:
        basic = base64.b64encode(f"{username or 'git'}:{password}".encode()).decode()
        config.append(("http.extraHeader", f"Authorization: Basic {basic}"))
    env["GIT_CONFIG_COUNT"] = str(len(config))
    for index, (key, value) in enumerate(config):
        env |= {f"GIT_CONFIG_KEY_{index}": key, f"GIT_CONFIG_VALUE_{index}": value}
    return env


def _git(
    args: list[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    stdin: bytes | None = None,
) -> bytes:
    # A session of its own, so that a timeout kills git's helpers too (git-remote-https holds the connection
    # and the pipes: killing only git would leave it hanging on a server that does not answer).
    with subprocess.Popen(
        ["git", *args],
        cwd=cwd,
        env=env or _environment("", ""),
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    ) as process:
        try:
            out, err = process.communicate(stdin, timeout=max(timeout, 0.1))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise GitError(f"git {args[0]} did not finish within {timeout:.0f} s") from None
    if process.returncode != 0:
        lines = [line for line in err.decode(errors="replace").splitlines() if line.strip()]
        raise GitError(f"git {args[0]} failed: {' / '.join(lines[-3:]) or f'exit code {process.returncode}'}")
    return out


def valid_branch(branch: str) -> bool:
    try:
        _git(["check-ref-format", "--branch", branch])
    except GitError:
        return False
    return not branch.startswith("-")


def fetch(
    name: str,
    url: str,
    branch: str,
    *,
    username: str = "",
    password: str = "",
    deadline: Deadline | None = None,
) -> str:
    """Fetch the branch's newest commit into the source's bare repository; returns its id."""
    try:
        where = check_url(url, has_password=bool(password))
    except ValidationFailed as exc:
        raise GitError(f"not fetched: {exc.detail}") from None
    directory = repository_dir(name)
    if not (directory / "HEAD").exists():
        directory.parent.mkdir(parents=True, exist_ok=True)
        _git(["init", "--bare", "--quiet", str(directory)])
    env = _environment(username, password, where)
    refspec = f"+refs/heads/{branch}:{REF}"
    timeout = settings.GITOPS_FETCH_TIMEOUT
    if deadline is not None:
        deadline.check("fetching")
        timeout = min(timeout, deadline.remaining())
    try:
        _git(
            ["fetch", "--quiet", "--no-tags", "--depth=1", "--", url, refspec],
            cwd=directory,
            env=env,
            timeout=timeout,
        )
    except GitError as exc:
        if deadline is not None:
            deadline.check("fetching")  # a timeout that is the sync's: say so
        # git asks for a name and password after a 401; with prompts off, that is how a refusal reads.
        if "terminal prompts disabled" in str(exc) or "Authentication failed" in str(exc):
            given = "given" if password else "(none are set: give a username and password or token)"
            raise GitError(f"the git server refused the credentials {given}: {exc}") from None
        raise
    return _git(["rev-parse", f"{REF}^{{commit}}"], cwd=directory).decode().strip()


@dataclass(frozen=True)
class _Blob:
    file: str
    oid: str
    size: int


def _listing(directory: Path, revision: str, folder: str) -> list[_Blob]:
    """The manifest files under `folder` in the commit with their sizes, from the tree alone."""
    listing = _git(["ls-tree", "-r", "-z", "-l", revision, "--", folder], cwd=directory)
    blobs = []
    for entry in listing.split(b"\0"):
        meta, _, raw_name = entry.partition(b"\t")
        fields = meta.split()
        file = raw_name.decode(errors="replace")  # names are shown, never used to read: blobs go by id
        if len(fields) == 4 and fields[1] == b"blob" and file.endswith(SUFFIXES):
            blobs.append(_Blob(file, fields[2].decode(), int(fields[3])))
    return sorted(blobs, key=lambda b: b.file)


def _check_limits(blobs: list[_Blob], limits: Limits, folder: str) -> None:
    where = "the top folder" if folder == "." else repr(folder)
    if len(blobs) > limits.files:
        raise LimitExceeded(
            f"{len(blobs)} manifest files under {where}; a sync reads at most {limits.files} "
            "(GPUCLOUD_GITOPS_MAX_FILES); nothing was applied"
        )
    too_big = [
        Problem(
            b.file,
            None,
            "",
            f"the file has {b.size} bytes; a manifest file may have at most {limits.file_bytes} "
            "(GPUCLOUD_GITOPS_MAX_FILE_BYTES)",
        )
        for b in blobs
        if b.size > limits.file_bytes
    ]
    if too_big:
        raise ManifestInvalid(too_big)
    total = sum(b.size for b in blobs)
    if total > limits.commit_bytes:
        raise LimitExceeded(
            f"the manifest files under {where} have {total} bytes; a sync reads at most "
            f"{limits.commit_bytes} (GPUCLOUD_GITOPS_MAX_COMMIT_BYTES); nothing was applied"
        )


def manifests_at(
    name: str, revision: str, path: str, *, limits: Limits | None = None, deadline: Deadline | None = None
) -> list[tuple[str, bytes]]:
    """(file name, content) of every *.yaml, *.yml and *.json under `path` in the commit, sorted by name.

    The limits are checked on the tree's listing first, so a file over them is never read; the files are
    then read by one `git cat-file --batch`, not a process each."""
    directory = repository_dir(name)
    folder = str(PurePosixPath(path.strip("/"))) if path.strip("/") else "."
    blobs = _listing(directory, revision, folder)
    _check_limits(blobs, limits or Limits.from_settings(), folder)
    if not blobs:
        return []
    timeout = 60.0
    if deadline is not None:
        deadline.check("listing the manifest files")
        timeout = min(timeout, deadline.remaining())
    try:
        out = _git(
            ["cat-file", "--batch"],
            cwd=directory,
            stdin="".join(f"{b.oid}\n" for b in blobs).encode(),
            timeout=timeout,
        )
    except GitError:
        if deadline is not None:
            deadline.check("reading the manifest files")  # a timeout that is the sync's: say so
        raise
    return list(zip((b.file for b in blobs), _contents(out, len(blobs)), strict=True))


def _contents(out: bytes, count: int) -> list[bytes]:
    """The contents in `git cat-file --batch` output: `<oid> <type> <size>\\n<content>\\n` each."""
    contents, at = [], 0
    for _ in range(count):
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        contents.append(out[header_end + 1 : header_end + 1 + size])
        at = header_end + 1 + size + 1
    return contents
