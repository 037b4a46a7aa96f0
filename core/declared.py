"""Declared state as the services see it: which manifest sources a caller may name, and the one rule for
objects a *syncing* source declares.

A source is who declared an object through the apply path (`gitops.apply`; docs/gitops.md, "Who owns what"):
`gitops:<name>` for a GitOps source and `kubernetes:<host cluster>/<namespace>/<Kind>/<name>` for a Tenant or
RateCard custom resource (set by those doors themselves), `api:<username>` for `POST /api/v1/apply/` by
default (derived from the caller), a name a platform administrator or a token bound to it gives, or
`file:<path>` at the console. GitOps sources and custom resources are *syncing*: they put the fields they
declare back within a minute, so a change another door makes to one of those fields would be accepted and
then silently undone. Every service that writes such a field calls `refuse_undone_edit` first, which refuses
it (409 `managed-by-source`), naming the source and where to make the change instead.

Which source declares what is recorded above this layer (`gitops.models.ManagedObject`); the services ask
through the function `settings.DECLARATION_LOOKUP` names (resolved at run time, as `WSGI_STARTUP` is), so
`tenants` never imports `gitops`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.conf import settings
from django.utils.module_loading import import_string

from core.audit import Actor
from gpucloud.errors import ManagedBySource

SOURCE_RE = r"^[a-z0-9][a-z0-9:._/-]{0,99}$"
SYNCING = ("gitops:", "kubernetes:")  # set by their own doors, never named by a caller
DERIVED = ("api:",)  # the API's source of each caller, derived from who they are
RESERVED = (*SYNCING, *DERIVED)
# Before issue 24 every /apply/ without a source recorded `api`, whoever called: a name nobody may use again.
LEGACY = "api"


@dataclass(frozen=True)
class Declaration:
    """Who declares an object: its source, the spec fields it declares, and where a person changes them."""

    source: str
    fields: frozenset[str]
    where: str

    @property
    def syncing(self) -> bool:
        """Whether the source puts its fields back by itself (a GitOps source, a custom resource)."""
        return self.source.startswith(SYNCING)

    @property
    def door(self) -> str:
        """The kind of source, in a word for a badge: GitOps, Kubernetes, or manifest."""
        if self.source.startswith("gitops:"):
            return "GitOps"
        return "Kubernetes" if self.source.startswith("kubernetes:") else "manifest"

    @property
    def field_list(self) -> str:
        """The declared fields, as a manifest spells them: "displayName, members, quotas"."""
        return ", ".join(sorted(self.fields))


def source_problem(name: str) -> str | None:
    """Why `name` cannot be named as a source by a caller (or bound to a token), or None."""
    if not re.fullmatch(SOURCE_RE, name):
        return (
            f"{name!r} is not a source name: up to 100 lowercase letters, digits and . _ / : -, starting "
            "with a letter or digit"
        )
    if name == LEGACY or name.startswith(RESERVED):
        return (
            f"{name!r} is reserved: gitops:… and kubernetes:… are set by a GitOps source and a custom "
            "resource themselves, and api:… is derived from who calls (leave the source out)"
        )
    return None


def _lookup() -> Callable[[str, str], Declaration | None]:
    lookup: Callable[[str, str], Declaration | None] = import_string(settings.DECLARATION_LOOKUP)
    return lookup


def declaration(kind: str, name: str) -> Declaration | None:
    """The source that declares the object (`Tenant`, `RateCard`, `HostCluster` and its name), or None."""
    return _lookup()(kind, name)


def refuse_undone_edit(actor: Actor, kind: str, name: str, fields: Iterable[str] | None, what: str) -> None:
    """Refuse a change to `fields` of an object (None: the object itself, e.g. deleting it) that the syncing
    source declaring them would undo at its next sync; that source's own apply (`actor.source`) may."""
    found = declaration(kind, name)
    if found is None or not found.syncing or actor.source == found.source:
        return
    touched = sorted(found.fields if fields is None else set(fields) & found.fields)
    if fields is not None and not touched:
        return  # fields the source leaves alone
    listed = ", ".join(touched)
    raise ManagedBySource(
        f"{what} was refused: {kind} {name} is declared by {found.where}, whose next sync would undo it; "
        + (f"change {listed} there" if fields is not None else "remove it there (the sync then prunes it)"),
        errors={field: [f"declared by {found.source}"] for field in touched} if fields is not None else {},
        managed_by=found.source,
    )
