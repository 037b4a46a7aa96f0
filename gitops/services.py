"""GitOps sources: registering them, syncing one (fetch, validate, apply with pruning, record the outcome),
and checking the signature of a push webhook."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import re
import shutil
from collections.abc import Mapping
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.utils import timezone

from core import audit
from core.audit import Actor
from gitops import git
from gitops.apply import apply, drift
from gitops.manifests import ManifestInvalid, clip, read_texts
from gitops.models import GitSource, ManagedObject, WebhookDelivery
from gpucloud import crypto, outbound
from gpucloud.celery import SYNC_GITOPS_SOURCE, enqueue
from gpucloud.errors import Conflict, PermissionDenied, TemporaryError, ValidationFailed
from gpucloud.locks import exclusive

log = logging.getLogger(__name__)
NAME_RE = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
SCHEMES = ("https", "http", "file")
# A failed sync keeps this many of its problems (its error says how many there were) and this much error text.
PROBLEMS_KEPT = 100
ERROR_LIMIT = 1000


def actor_of(source: GitSource) -> Actor:
    """Who a sync writes as: `system:gitops:<name>`, a process trusted like the console."""
    return Actor(user=None, label=f"system:gitops:{source.name}", operator=True)


def snapshot(source: GitSource) -> dict[str, Any]:
    return {
        "name": source.name,
        "url": source.url,
        "branch": source.branch,
        "path": source.path,
        "interval": source.interval,
        "username": source.username,
        "password": bool(source.password_ciphertext),  # never the secret itself
        "webhook_secret": bool(source.webhook_secret_ciphertext),
    }


def _validate_url(url: str, *, allow_file: bool) -> None:
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES or (parts.scheme != "file" and not parts.hostname):
        raise ValidationFailed.on("url", f"{url!r} is not a git URL; use https://, http:// or file://")
    if parts.scheme == "file" and not allow_file:
        raise ValidationFailed.on(
            "url",
            "file:// URLs read the server's own disk: only the console (manage.py gitops add) registers "
            "them, unless GPUCLOUD_GITOPS_FILE_URLS=true",
        )
    if parts.username or parts.password:
        raise ValidationFailed.on(
            "url", "put credentials in username and password (kept encrypted), not in the URL"
        )


def _check_destination(url: str, *, has_password: bool) -> None:
    """No credentials over http://, and an http(s) host that resolves only to public or allowed addresses
    (`gitops.git.check_url`). A name that does not resolve now is accepted: every fetch checks again."""
    with contextlib.suppress(outbound.HostUnresolved):
        git.check_url(url, has_password=has_password)


def _validate(fields: Mapping[str, Any], *, allow_file: bool) -> None:
    if "name" in fields and not re.fullmatch(NAME_RE, fields["name"]):
        raise ValidationFailed.on(
            "name", f"{fields['name']!r} is not a name: lowercase letters, digits, hyphens"
        )
    if "url" in fields:
        _validate_url(fields["url"], allow_file=allow_file)
    if "branch" in fields and not git.valid_branch(fields["branch"]):
        raise ValidationFailed.on("branch", f"{fields['branch']!r} is not a branch name git accepts")
    if "path" in fields and (fields["path"].startswith("/") or ".." in fields["path"].split("/")):
        raise ValidationFailed.on("path", "the path is a folder inside the repository, e.g. clusters/prod")
    if "interval" in fields and not 10 <= fields["interval"] <= 86400:
        raise ValidationFailed.on("interval", "the interval is from 10 to 86400 seconds")


def _seal(fields: dict[str, Any]) -> dict[str, Any]:
    for plain, sealed in (
        ("password", "password_ciphertext"),
        ("webhook_secret", "webhook_secret_ciphertext"),
    ):
        if plain in fields:
            value = fields.pop(plain)
            fields[sealed] = crypto.encrypt(value) if value else ""
    return fields


@transaction.atomic
def create_source(*, actor: Actor, name: str, url: str, **fields: Any) -> GitSource:
    """Register a git repository to sync; platform administrators (or the console) only."""
    if not actor.is_platform_admin:
        raise PermissionDenied("GitOps sources are registered by platform administrators only")
    fields = {"name": name, "url": url, **fields}
    _validate(fields, allow_file=actor.operator or settings.GITOPS_FILE_URLS)
    _check_destination(url, has_password=bool(fields.get("password")))
    if GitSource.objects.filter(name=name).exists():
        raise Conflict(f"a GitOps source called {name!r} exists already", errors={"name": ["already taken"]})
    source = GitSource.objects.create(**_seal(fields))
    audit.record(
        actor, "gitops.source.create", object_type="gitops_source", object_id=name, after=snapshot(source)
    )
    return source


@transaction.atomic
def update_source(*, actor: Actor, source: GitSource, **fields: Any) -> GitSource:
    """Change where a source reads from, how often, or its credentials."""
    if not actor.is_platform_admin:
        raise PermissionDenied("GitOps sources are changed by platform administrators only")
    fields.pop("name", None)  # the name is whose objects they are: it does not change
    _validate(fields, allow_file=actor.operator or settings.GITOPS_FILE_URLS)
    source = GitSource.objects.select_for_update().get(pk=source.pk)
    if "url" in fields or fields.get("password"):
        has_password = bool(fields["password"]) if "password" in fields else bool(source.password_ciphertext)
        _check_destination(fields.get("url", source.url), has_password=has_password)
    before = snapshot(source)
    for key, value in _seal(fields).items():
        setattr(source, key, value)
    source.save()
    audit.record(
        actor,
        "gitops.source.update",
        object_type="gitops_source",
        object_id=source.name,
        before=before,
        after=snapshot(source),
    )
    return source


@transaction.atomic
def delete_source(*, actor: Actor, source: GitSource) -> None:
    """Stop syncing. The objects it applied stay, no longer managed (nothing is deleted with it)."""
    if not actor.is_platform_admin:
        raise PermissionDenied("GitOps sources are removed by platform administrators only")
    released = ManagedObject.objects.filter(source=source.owner).delete()[0]
    before = snapshot(source)
    source.delete()
    audit.record(
        actor,
        "gitops.source.delete",
        object_type="gitops_source",
        object_id=before["name"],
        before={**before, "released_objects": released},
    )
    transaction.on_commit(lambda: shutil.rmtree(git.repository_dir(before["name"]), ignore_errors=True))


def _fail(source: GitSource, revision: str, error: str, problems: list[dict[str, Any]]) -> None:
    error = clip(error, ERROR_LIMIT)
    GitSource.objects.filter(pk=source.pk).update(
        state=GitSource.State.FAILED,
        last_attempted_revision=revision,
        error=error,
        problems=problems[:PROBLEMS_KEPT],
        last_attempt_at=timezone.now(),
    )
    log.warning("GitOps sync failed", extra={"source": source.name, "revision": revision, "error": error})


def sync(source: GitSource, *, take_ownership_by: Actor | None = None) -> GitSource:
    """Fetch the branch, validate every manifest of the commit, apply them all (pruning this source's
    objects no longer declared) in one transaction, and record revision, state, error and drift.

    A commit with any bad manifest, one over the limits (`git.Limits`, `GPUCLOUD_GITOPS_SYNC_TIMEOUT`), or
    one a service refuses, applies nothing; the source keeps its last good revision and shows the reason.
    Safe to run twice: a second sync of the same commit writes nothing.
    `take_ownership_by`, a platform administrator, takes what the commit declares and another source owns over
    for this source, writing as that administrator (`manage.py gitops sync NAME --take-ownership`).
    """
    with exclusive(f"gitops-source-{source.pk}"):
        source = GitSource.objects.get(pk=source.pk)
        deadline = git.Deadline(settings.GITOPS_SYNC_TIMEOUT)
        revision = ""
        try:
            password = crypto.decrypt(source.password_ciphertext) if source.password_ciphertext else ""
        except crypto.DecryptionFailed as exc:
            _fail(source, revision, f"the password cannot be read: {exc}; set it again", [])
            source.refresh_from_db()
            return source
        try:
            revision = git.fetch(
                source.name,
                source.url,
                source.branch,
                username=source.username,
                password=password,
                deadline=deadline,
            )
            files = git.manifests_at(source.name, revision, source.path, deadline=deadline)
            if not files:
                raise git.GitError(
                    f"no *.yaml, *.yml or *.json files under {source.path or 'the top folder'!r}; nothing "
                    "was pruned (to remove every object, leave an empty .yaml file there)"
                )
            documents = read_texts(files, check=lambda: deadline.check("reading the manifests"))
            deadline.check("reading the manifests")
            drifted = drift(source.owner)
            result = apply(
                documents,
                actor=take_ownership_by or actor_of(source),
                source=source.owner,
                prune=True,
                revision=revision,
                take_ownership=take_ownership_by is not None,
            )
        except git.GitError as exc:
            _fail(source, revision, str(exc), [])
        except ManifestInvalid as exc:
            first = exc.problems[0]
            more = f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
            _fail(
                source,
                revision,
                f"commit {revision[:12]} was not applied: {first}{more}",
                [p.as_dict() for p in exc.problems[:PROBLEMS_KEPT]],
            )
        except (TemporaryError, DatabaseError):
            raise  # the task retries these
        except Exception as exc:
            # A bug, not the commit's fault, but the source must say it failed rather than stay pending
            # and be retried at every poll.
            log.exception("GitOps sync failed unexpectedly", extra={"source": source.name})
            _fail(source, revision, f"the sync failed unexpectedly ({type(exc).__name__}); see the logs", [])
        else:
            _succeed(source, revision, [str(c) for c in drifted], len(result.changes))
        source.refresh_from_db()
        return source


def _succeed(source: GitSource, revision: str, drifted: list[str], changes: int) -> None:
    now = timezone.now()
    GitSource.objects.filter(pk=source.pk).update(
        state=GitSource.State.SYNCED,
        last_revision=revision,
        last_attempted_revision=revision,
        error="",
        problems=[],
        drift=drifted,
        last_synced_at=now,
        last_attempt_at=now,
    )
    if drifted:
        audit.record(
            actor_of(source),
            "gitops.drift_restored",
            object_type="gitops_source",
            object_id=source.name,
            after={"revision": revision, "drift": drifted},
        )
        log.warning("GitOps drift restored", extra={"source": source.name, "drift": drifted})
    log.info("GitOps sync", extra={"source": source.name, "revision": revision, "changes": changes})


def due_sources() -> list[GitSource]:
    """Sources whose interval has passed since their last attempt (or that never ran)."""
    now = timezone.now()
    return [
        s
        for s in GitSource.objects.all()
        if s.last_attempt_at is None or (now - s.last_attempt_at).total_seconds() >= s.interval
    ]


def request_sync(source: GitSource) -> None:
    """Sync soon, in a worker (after the current transaction commits)."""
    source_id = source.pk
    transaction.on_commit(lambda: enqueue(SYNC_GITOPS_SOURCE, source_id))


def signature_valid(source: GitSource, headers: Mapping[str, str], body: bytes) -> bool:
    """Whether a push webhook comes from the forge: GitHub's `X-Hub-Signature-256` (`sha256=` + HMAC-SHA256
    of the body), Gitea's `X-Gitea-Signature` (the bare hex HMAC), or GitLab's `X-Gitlab-Token`
    (the secret itself)."""
    if not source.webhook_secret_ciphertext:
        return False
    secret = crypto.decrypt(source.webhook_secret_ciphertext).encode()
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    if "X-Hub-Signature-256" in headers:
        return hmac.compare_digest(headers["X-Hub-Signature-256"].encode(), f"sha256={expected}".encode())
    if "X-Gitea-Signature" in headers:
        return hmac.compare_digest(headers["X-Gitea-Signature"].encode(), expected.encode())
    if "X-Gitlab-Token" in headers:
        return hmac.compare_digest(headers["X-Gitlab-Token"].encode(), secret)
    return False


# Where each forge names a delivery (GitLab's UUID is per event; a redelivery repeats GitHub's and Gitea's).
DELIVERY_HEADERS = ("X-GitHub-Delivery", "X-Gitea-Delivery", "X-Gitlab-Event-UUID")


def record_delivery(source: GitSource, headers: Mapping[str, str], body: bytes) -> bool:
    """Remember a signed webhook delivery; False when it was received before: a replay.

    A delivery is the same when its delivery id is, or its body is (the signature covers the body only, so
    someone replaying a captured request can change the id header but not the body).
    """
    delivery = next((headers[h] for h in DELIVERY_HEADERS if headers.get(h)), "")[:100]
    try:
        with transaction.atomic():  # the unique constraints decide, also between two copies at once
            WebhookDelivery.objects.create(
                source=source, delivery=delivery, digest=hashlib.sha256(body).hexdigest()
            )
    except IntegrityError:
        log.warning("GitOps webhook replay refused", extra={"source": source.name, "delivery": delivery})
        return False
    return True


def forget_deliveries(now: Any = None) -> int:
    """Forget webhook deliveries older than `GITOPS_WEBHOOK_REPLAY_WINDOW`; returns how many."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.GITOPS_WEBHOOK_REPLAY_WINDOW)
    return WebhookDelivery.objects.filter(received_at__lt=cutoff).delete()[0]
