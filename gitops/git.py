"""Fetching a branch with the real `git` and reading manifests out of a commit, without a working tree.

Each source has a bare repository under `GPUCLOUD_VAR_DIR/gitops/<name>.git`; a fetch moves
`refs/gitops/head` to the branch's newest commit. Credentials reach git through the environment
(`GIT_CONFIG_*` adds an `Authorization` header), never the command line, so no process listing shows them.
Only file://, http:// and https:// are allowed (`GIT_ALLOW_PROTOCOL`), and git never prompts.
"""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path, PurePosixPath

from django.conf import settings

from gitops.manifests import SUFFIXES

REF = "refs/gitops/head"
PROTOCOLS = "file:http:https"


class GitError(Exception):
    """git could not fetch or read: unreachable URL, refused credentials, unknown branch, timeout."""


def repository_dir(name: str) -> Path:
    return Path(settings.VAR_DIR) / "gitops" / f"{name}.git"


def _environment(username: str, password: str) -> dict[str, str]:
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
    if password:
        basic = base64.b64encode(f"{username or 'git'}:{password}".encode()).decode()
        env |= {
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "http.extraHeader",
            "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
        }
    return env


def _git(
    args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> bytes:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=env or _environment("", ""),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} did not finish within {timeout:.0f} s") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.decode(errors="replace").splitlines() if line.strip()]
        raise GitError(f"git {args[0]} failed: {' / '.join(lines[-3:]) or f'exit code {done.returncode}'}")
    return done.stdout


def valid_branch(branch: str) -> bool:
    try:
        _git(["check-ref-format", "--branch", branch])
    except GitError:
        return False
    return not branch.startswith("-")


def fetch(name: str, url: str, branch: str, *, username: str = "", password: str = "") -> str:
    """Fetch the branch's newest commit into the source's bare repository; returns its id."""
    directory = repository_dir(name)
    if not (directory / "HEAD").exists():
        directory.parent.mkdir(parents=True, exist_ok=True)
        _git(["init", "--bare", "--quiet", str(directory)])
    env = _environment(username, password)
    refspec = f"+refs/heads/{branch}:{REF}"
    try:
        _git(
            ["fetch", "--quiet", "--no-tags", "--depth=1", "--", url, refspec],
            cwd=directory,
            env=env,
            timeout=settings.GITOPS_FETCH_TIMEOUT,
        )
    except GitError as exc:
        # git asks for a name and password after a 401; with prompts off, that is how a refusal reads.
        if "terminal prompts disabled" in str(exc) or "Authentication failed" in str(exc):
            given = "given" if password else "(none are set: give a username and password or token)"
            raise GitError(f"the git server refused the credentials {given}: {exc}") from None
        raise
    return _git(["rev-parse", f"{REF}^{{commit}}"], cwd=directory).decode().strip()


def manifests_at(name: str, revision: str, path: str) -> list[tuple[str, str]]:
    """(file name, text) of every *.yaml, *.yml and *.json under `path` in the commit, sorted by name."""
    directory = repository_dir(name)
    folder = str(PurePosixPath(path.strip("/"))) if path.strip("/") else "."
    listing = _git(["ls-tree", "-r", "-z", "--name-only", revision, "--", folder], cwd=directory)
    names = sorted(n for n in listing.decode().split("\0") if n and n.endswith(SUFFIXES))
    files = []
    for file in names:
        blob = _git(["cat-file", "blob", f"{revision}:{file}"], cwd=directory)
        files.append((file, blob.decode("utf-8", errors="replace")))
    return files
