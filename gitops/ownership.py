"""Who owns what is applied from manifests: the source of an apply, what it may claim, who declares an object.

The source of a change is a fact of the door it came through, never something a caller picks for themselves:

- `POST /api/v1/apply/` applies as `api:<username>` of the caller (`request_source`). A platform administrator
  may name another source, and a token bound to a source (`ApiToken.source`) applies as that source only.
  `gitops:…`, `kubernetes:…` and `api:…` cannot be named (`core.declared.source_problem`).
- A GitOps sync applies as `gitops:<name>`, a Tenant or RateCard custom resource as
  `kubernetes:<host cluster>/<namespace>/<Kind>/<name>`, both set by their own code.
- `manage.py apply` applies as `file:<absolute path>` or the `--source` given at the console.

What a source owns (a `ManagedObject` row) changes only by an apply of a platform administrator (or a process
trusted like one: the console, a GitOps source, the tenant watcher): it claims what it creates, and, unless it
is an `api:` source, what it declares that nobody owns yet. So an `api:<you>` source owns exactly what you
created through `/apply/` (and what you took over), and its prune deletes nothing anyone else made. Taking an
object from another source is explicit (`take_ownership`, platform administrators only). Every change of
ownership is audited with the real actor (`ownership.claim`, `ownership.take`, `ownership.release`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core import audit
from core.audit import Actor
from core.declared import DERIVED, Declaration, source_problem
from gitops.models import GitSource, ManagedObject
from gpucloud.errors import PermissionDenied, ValidationFailed
from tenants.models import Tenant


def request_source(actor: Actor, requested: str | None, bound: str = "") -> str:
    """The source of an API apply by `actor`: derived from who they are, named only where allowed.

    `bound` is the source the caller's token is bound to ("" when it is bound to none).
    """
    if bound:
        if requested not in (None, bound):
            raise PermissionDenied(
                f"this token is bound to the source {bound!r} and applies as that source only, not "
                f"{requested!r}"
            )
        return bound
    if actor.user is None:
        raise PermissionDenied("applying manifests needs a signed-in caller")
    own = f"{DERIVED[0]}{actor.user.get_username()}"
    if requested is None or requested == own:
        return own
    if not actor.is_platform_admin:
        raise PermissionDenied(
            f"naming a source is for platform administrators (or a token bound to it); leave it out and "
            f"your applies are {own!r}"
        )
    problem = source_problem(requested)
    if problem is not None:
        raise ValidationFailed.on("source", problem)
    return requested


def adopts(source: str) -> bool:
    """Whether `source` claims an existing object nobody owns when it declares it: every source but the
    API's derived `api:<username>`, which owns only what it created (its prune must delete nothing else)."""
    return not source.startswith(DERIVED)


def may_change_ownership(actor: Actor) -> bool:
    """Only platform administrators (and processes trusted like them) change what a source owns."""
    return actor.is_platform_admin


@dataclass(frozen=True)
class Move:
    """A change of ownership an apply made: `claim` (nobody owned it), `take` (from `previous`), `release`."""

    action: str
    kind: str
    name: str
    previous: str | None
    source: str | None

    def __str__(self) -> str:
        if self.action == "take":
            return f"take {self.kind} {self.name} from {self.previous}"
        return f"{self.action} {self.kind} {self.name}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "kind": self.kind,
            "name": self.name,
            "previous": self.previous,
            "source": self.source,
        }


def audit_moves(actor: Actor, moves: list[Move], revision: str) -> None:
    """One audit row per change of ownership, in the tenant's own log when the object is a tenant."""
    for move in moves:
        tenant = Tenant.objects.filter(slug=move.name).first() if move.kind == "Tenant" else None
        audit.record(
            actor,
            f"ownership.{move.action}",
            object_type=move.kind.lower(),
            object_id=tenant.public_id if tenant is not None else move.name,
            tenant=tenant,
            before={"source": move.previous},
            after={"source": move.source, **({"revision": revision} if revision else {})},
        )


def describe(source: str) -> str:
    """Where a person changes what `source` declares, in words."""
    if source.startswith("gitops:"):
        git = GitSource.objects.filter(name=source.removeprefix("gitops:")).first()
        if git is not None:
            folder = f", folder {git.path}" if git.path else ""
            return f"the GitOps source {git.name} ({git.url}, branch {git.branch}{folder})"
    if source.startswith("kubernetes:"):
        parts = source.removeprefix("kubernetes:").split("/", 3)
        if len(parts) == 4:
            host, namespace, kind, name = parts
            return f"the {kind} object {name} in namespace {namespace} of host cluster {host}"
    return f"the source {source}"


def declaration(kind: str, name: str) -> Declaration | None:
    """The source that declares an object and the spec fields it declares (`settings.DECLARATION_LOOKUP`)."""
    row = ManagedObject.objects.filter(kind=kind, name=name).only("source", "applied").first()
    if row is None:
        return None
    return Declaration(source=row.source, fields=frozenset(row.applied), where=describe(row.source))
