"""The one apply path for manifests: `manage.py apply` and `diff`, `POST /api/v1/apply/` and the GitOps sync
all call `apply` (custom resources and anything else declarative should too).

`apply` plans (compares each manifest with the database), then carries the plan out through the same
services the API calls (same validation, capacity admission, trust tiers, audit), all in one transaction:
one bad document, or one refusal by a service, applies nothing. Services enqueue follow-up work with
`transaction.on_commit`, so a rolled-back apply (or a dry run, which is rolled back on purpose) enqueues
nothing. What each source owns is recorded (`ManagedObject`, by the rules of `gitops.ownership`); pruning
removes only objects the same source owns and no longer declares.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from billing.models import RateCard
from billing.services import budgets, rates
from core import audit
from core.audit import Actor
from fleet import services as fleet
from fleet.models import GpuClass, HostCluster, host_cluster_named
from gitops import ownership
from gitops import specs as state
from gitops.manifests import Document, ManifestInvalid, Problem
from gitops.models import ManagedObject
from gitops.ownership import Move
from gpucloud.errors import PermissionDenied, ServiceError
from gpucloud.transactions import retry_on_conflict
from tenants import invitations
from tenants.models import Invitation, Membership, Quota, Tenant
from tenants.services import lifecycle, members, quotas, sleep

# Order of the steps of one apply: guarantees shrink before any grows (freed capacity is reused in the
# same apply), tiers change between the two (a tier that loses a class after its quota went, one that gains
# it before it comes), new owners come before anyone is demoted or removed (the last owner stays).
HOSTS, PRUNE, SHRINK, TENANT, GROW, OWNERS, MEMBERS, UNMEMBERS, BUDGET, SLEEP, CARDS = range(11)
IMMUTABLE_HOST_FIELDS = {"driver": "driver", "scheduler": "scheduler", "vclusterMode": "vcluster_mode"}


@dataclass(frozen=True)
class FieldChange:
    path: str
    before: Any
    after: Any

    def __str__(self) -> str:
        if self.before is None:
            return f"  + {self.path}: {self.after!r}"
        if self.after is None:
            return f"  - {self.path}: {self.before!r}"
        return f"  ~ {self.path}: {self.before!r} → {self.after!r}"


@dataclass
class Change:
    """What apply does to one object: create, update, delete (pruned tenant), withdraw (pruned rate card:
    deleted if no issued invoice used it, else retired) or release (pruned host cluster: no longer owned,
    kept, since registrations need it)."""

    kind: str
    name: str
    action: str
    fields: list[FieldChange] = field(default_factory=list)
    document: Document | None = None
    desired: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        sign = {"create": "+", "update": "~", "delete": "-", "withdraw": "-", "release": "!"}[self.action]
        head = (
            f"{sign} {self.kind} {self.name}"
            + {
                "create": " (create)",
                "update": "",
                "delete": " (prune: delete)",
                "withdraw": " (prune: delete, or retire if issued invoices used it)",
                "release": " (prune: no longer managed, kept)",
            }[self.action]
        )
        return "\n".join([head, *(str(f) for f in self.fields)])

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "action": self.action,
            "fields": [{"path": f.path, "before": f.before, "after": f.after} for f in self.fields],
        }


@dataclass
class Result:
    changes: list[Change]
    dry_run: bool
    drift: list[Change] = field(default_factory=list)
    source: str = ""
    ownership: list[Move] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "dryRun": self.dry_run,
            "changed": bool(self.changes),
            "changes": [c.as_dict() for c in self.changes],
            "source": self.source,
            "ownership": [m.as_dict() for m in self.ownership],
        }


class _DryRun(Exception):
    """Raised at the end of a dry run to roll everything back (and drop every on_commit callback)."""


ORDER = ("role", "guaranteed", "burst", "lendable", "weight")


def _keyed(items: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    """{item[key]: the rest of the item}, its fields in one order (JSON columns do not keep theirs)."""
    return {item[key]: {k: item[k] for k in ORDER if k in item} for item in items}


def compare(desired: dict[str, Any], current: dict[str, Any]) -> list[FieldChange]:
    """Field by field, the managed fields (those in `desired`) that differ from `current`."""
    changes: list[FieldChange] = []
    for name, wanted in sorted(desired.items()):
        have = current.get(name)
        if name in ("members", "quotas"):
            key = "user" if name == "members" else "gpuClass"
            after, before = _keyed(wanted, key), _keyed(have or [], key)
            for item in sorted(set(after) | set(before)):
                b, a = before.get(item), after.get(item)
                if name == "members":
                    b, a = b and b["role"], a and a["role"]
                if a != b:
                    changes.append(FieldChange(f"{name}[{item}]", b, a))
        elif name in ("budget", "sleep") and have is not None:
            changes += [
                FieldChange(f"{name}.{k}", have.get(k), v)
                for k, v in sorted(wanted.items())
                if have.get(k) != v
            ]
        elif wanted != have:
            changes.append(FieldChange(name, have, wanted))
    return changes


def _static_problems(document: Document, spec: dict[str, Any], obj: Any) -> list[Problem]:
    """What the database already tells us is impossible, all reported at once before anything is written."""
    if document.kind == "Tenant":
        return [
            *_gone_tenant_problems(document, obj),
            *_host_choice_problems(document, spec, obj),
            *_unknown_class_problems(document),
            *_unknown_user_problems(document),
            *_sleep_delay_problems(document, spec),
        ]
    if document.kind == "HostCluster":
        return _host_cluster_problems(document, spec, obj)
    return []


def _gone_tenant_problems(document: Document, obj: Tenant | None) -> list[Problem]:
    if obj is None or obj.state not in state.GONE:
        return []
    return [document.problem("metadata.name", f"tenant {obj.slug} is {obj.state}; slugs are never reused")]


def _host_choice_problems(document: Document, spec: dict[str, Any], obj: Tenant | None) -> list[Problem]:
    """A tenant stays on the host cluster it was created on; a new one names a host cluster that exists."""
    wanted = spec.get("hostCluster")
    if obj is not None and wanted not in (None, obj.cluster.host_cluster.name):
        reason = f"tenant {obj.slug} runs on {obj.cluster.host_cluster.name}; a tenant cannot move"
        return [document.problem("spec.hostCluster", reason)]
    if obj is None and wanted and not HostCluster.objects.filter(name=wanted):
        known = ", ".join(HostCluster.objects.values_list("name", flat=True)) or "none"
        reason = f"there is no host cluster {wanted!r}; known: {known}"
        return [document.problem("spec.hostCluster", reason)]
    return []


def _unknown_class_problems(document: Document) -> list[Problem]:
    known = set(GpuClass.objects.values_list("name", flat=True))
    return [
        document.problem(
            f"spec.quotas[{index}].gpuClass",
            f"{quota['gpuClass']!r} is not a GPU class; classes look like h200-141gb, h200-141gb.mig-1g.18gb "
            "or h200-141gb.shared",
        )
        for index, quota in enumerate(document.spec.get("quotas", []))
        if quota["gpuClass"] not in known
    ]


def _unknown_user_problems(document: Document) -> list[Problem]:
    """Members named by username must have an account; an e-mail address becomes an invitation."""
    return [
        document.problem(
            f"spec.members[{index}].user",
            f"there is no user called {member['user']!r}; to invite someone who has not signed in yet, give "
            "their e-mail address",
        )
        for index, member in enumerate(document.spec.get("members", []))
        if "@" not in member["user"] and not state.User.objects.filter(username=member["user"]).exists()
    ]


def _sleep_delay_problems(document: Document, spec: dict[str, Any]) -> list[Problem]:
    problem = sleep.sleep_delay_problem(spec.get("sleep", {}).get("afterInactivity", ""))
    return [] if problem is None else [document.problem("spec.sleep.afterInactivity", problem)]


def _host_cluster_problems(
    document: Document, spec: dict[str, Any], obj: HostCluster | None
) -> list[Problem]:
    """A host cluster must be registered first, and what registration chose cannot change here."""
    if obj is None:
        return [
            document.problem(
                "metadata.name",
                f"there is no host cluster {document.name!r}: manifests carry no credentials, so register it "
                "first (POST /api/v1/host-clusters/ with its kubeconfig, or manage.py load_fleet)",
            )
        ]
    return [
        document.problem(
            f"spec.{key}",
            f"{key} is {getattr(obj, attribute)!r} and is chosen at registration; register the cluster again "
            "to change it",
        )
        for key, attribute in IMMUTABLE_HOST_FIELDS.items()
        if key in spec and spec[key] != getattr(obj, attribute)
    ]


def _owner(owners: dict[tuple[str, str], str], document: Document, obj: Any) -> str | None:
    """The source owning the object, as far as the caller may know: a tenant they cannot see has none (it
    does not exist for them, and must answer exactly as a slug nobody has)."""
    if document.kind == "Tenant" and obj is None:
        return None
    return owners.get((document.kind, document.name))


def plan(
    documents: list[Document],
    *,
    source: str,
    prune: bool = False,
    tenants: QuerySet[Tenant] | None = None,
    take_ownership: bool = False,
) -> list[Change]:
    """What applying these documents would change, or `ManifestInvalid` naming every problem found."""
    changes: list[Change] = []
    problems: list[Problem] = []
    conflicts = 0
    owners = {(m.kind, m.name): m.source for m in ManagedObject.objects.all()}
    for document in documents:
        obj = state.find(document.kind, document.name, tenants)
        owner = _owner(owners, document, obj)
        if owner is not None and owner != source and not take_ownership:
            conflicts += 1
            problems.append(
                document.problem(
                    "metadata.name",
                    f"{document} is managed by {owner}; change or remove it there (a platform administrator "
                    "may take it over for this source: takeOwnership, manage.py apply --take-ownership)",
                )
            )
            continue
        try:
            spec = state.desired(document)
        except state.Unresolvable as exc:
            problems.append(document.problem(exc.path, exc.reason))
            continue
        problems += _static_problems(document, spec, obj)
        current = state.current(document.kind, obj) if obj is not None else {}
        if obj is not None and document.kind == "HostCluster":
            spec = {k: v for k, v in spec.items() if k not in IMMUTABLE_HOST_FIELDS}
        fields = compare(spec, current)
        if obj is None or fields:
            action = "create" if obj is None else "update"
            changes.append(Change(document.kind, document.name, action, fields, document, spec))
        else:
            changes.append(Change(document.kind, document.name, "none", [], document, spec))
    if problems:
        # Only objects managed elsewhere: a conflict with the current state (409), not a bad document.
        raise ManifestInvalid(problems, status=409 if conflicts == len(problems) else 400)
    if prune:
        declared = {(d.kind, d.name) for d in documents}
        for kind, name in sorted(k for k, s in owners.items() if s == source and k not in declared):
            obj = state.find(kind, name)
            gone = obj is None or (kind == "Tenant" and obj.state in state.GONE)
            changes.append(Change(kind, name, _prune_action(kind, gone)))
    return changes


def _prune_action(kind: str, gone: bool) -> str:
    """A pruned tenant is deleted, a rate card withdrawn; a host cluster is released (kept: registrations)."""
    if gone or kind == "HostCluster":
        return "release"
    return "delete" if kind == "Tenant" else "withdraw"


Step = tuple[int, Change, str, Callable[[], Any]]


def _tenant(name: str) -> Tenant:
    return Tenant.objects.get(slug=name)


def _index(document: Document, listing: str, key: str, value: str) -> str:
    for index, item in enumerate(document.spec.get(listing, [])):
        if item[key] == value or (listing == "members" and state.member_key(item[key]) == value):
            return f"spec.{listing}[{index}]"
    return f"spec.{listing}"


def _quota_steps(actor: Actor, change: Change) -> list[Step]:
    """Removals and shrinking guarantees first (SHRINK), growing and new ones later (GROW)."""
    assert change.document is not None
    if "quotas" not in change.desired:
        return []  # not managed by this manifest
    name, document = change.name, change.document
    wanted = {q["gpuClass"]: q for q in change.desired["quotas"]}

    def remove(gpu_class: str) -> None:
        quotas.remove_quota(
            actor=actor, quota=Quota.objects.get(tenant__slug=name, gpu_class__name=gpu_class)
        )

    def put(quota: dict[str, Any]) -> None:
        quotas.set_quota(
            actor=actor,
            tenant=_tenant(name),
            gpu_class=GpuClass.objects.get(name=quota["gpuClass"]),
            guaranteed=quota["guaranteed"],
            burst=quota["burst"],
            lendable=quota["lendable"],
            weight=quota["weight"],
        )

    steps: list[Step] = []
    for f in change.fields:
        if not f.path.startswith("quotas["):
            continue
        gpu_class = f.path[len("quotas[") : -1]
        if f.after is None:
            steps.append((SHRINK, change, "spec.quotas", partial(remove, gpu_class)))
            continue
        shrinks = f.before is not None and f.after["guaranteed"] < f.before["guaranteed"]
        path = _index(document, "quotas", "gpuClass", gpu_class)
        steps.append((SHRINK if shrinks else GROW, change, path, partial(put, wanted[gpu_class])))
    return steps


def _member_steps(actor: Actor, change: Change) -> list[Step]:
    assert change.document is not None
    name, document = change.name, change.document

    def grant(who: str, role: str) -> None:
        if "@" in who:  # no single account has this address (state.member_key): an invitation
            tenant = _tenant(name)
            pending = Invitation.objects.filter(tenant=tenant, login__iexact=who, accepted_at=None)
            login = pending.values_list("login", flat=True).first() or who  # the portal keeps the case given
            invitations.invite(actor=actor, tenant=tenant, login=login, role=role)
        else:
            members.add_member(actor=actor, tenant=_tenant(name), username=who, role=role)

    def revoke(who: str) -> None:
        tenant = _tenant(name)
        if "@" in who:
            pending = Invitation.objects.filter(tenant=tenant, login__iexact=who, accepted_at=None)
            for invitation in pending.select_related("tenant"):
                invitations.cancel(actor=actor, invitation=invitation)
        else:
            membership = Membership.objects.get(tenant=tenant, user__username=who)
            members.remove_member(actor=actor, tenant=tenant, membership=membership)

    steps: list[Step] = []
    for f in change.fields:
        if not f.path.startswith("members["):
            continue
        who = f.path[len("members[") : -1]
        path = _index(document, "members", "user", who)
        if f.after is None:
            steps.append((UNMEMBERS, change, "spec.members", partial(revoke, who)))
        else:
            phase = OWNERS if f.after == Membership.Role.OWNER else MEMBERS
            steps.append((phase, change, path, partial(grant, who, f.after)))
    return steps


def _creator_step(actor: Actor, change: Change) -> list[Step]:
    """A person who creates a tenant becomes its owner; when the manifest lists the members, it decides."""
    if change.action != "create" or "members" not in change.desired or actor.user is None:
        return []
    username = actor.user.get_username()
    if username in {m["user"] for m in change.desired["members"]}:
        return []

    def drop() -> None:
        tenant = _tenant(change.name)
        membership = Membership.objects.filter(tenant=tenant, user=actor.user).first()
        if membership is not None:
            members.remove_member(actor=actor, tenant=tenant, membership=membership)

    return [(UNMEMBERS, change, "spec.members", drop)]


def _tenant_steps(actor: Actor, change: Change) -> list[Step]:
    """The steps of one tenant: its row first (create, rename, re-tier), budget, sleep, quotas, members."""
    if change.action == "delete":
        return [
            (PRUNE, change, "", lambda: lifecycle.delete_tenant(actor=actor, tenant=_tenant(change.name)))
        ]
    return [
        *_create_step(actor, change),
        *_update_step(actor, change),
        *_budget_step(actor, change),
        *_sleep_step(actor, change),
        *_quota_steps(actor, change),
        *_member_steps(actor, change),
        *_creator_step(actor, change),
    ]


def _create_step(actor: Actor, change: Change) -> list[Step]:
    if change.action != "create":
        return []
    spec = change.desired

    def create() -> None:
        lifecycle.create_tenant(
            actor=actor,
            slug=change.name,
            display_name=spec.get("displayName", ""),
            trust_tier=spec.get("trustTier", Tenant.TrustTier.STANDARD),
            host_cluster=host_cluster_named(spec.get("hostCluster")),
        )

    return [(TENANT, change, "metadata.name", create)]


def _update_step(actor: Actor, change: Change) -> list[Step]:
    """A new display name or trust tier of an existing tenant, in one service call."""
    renamed = {f.path: f.after for f in change.fields if f.path in ("displayName", "trustTier")}
    if change.action == "create" or not renamed:
        return []

    def update() -> None:
        lifecycle.update_tenant(
            actor=actor,
            tenant=_tenant(change.name),
            display_name=renamed.get("displayName"),
            trust_tier=renamed.get("trustTier"),
        )

    return [(TENANT, change, "spec.trustTier" if "trustTier" in renamed else "spec.displayName", update)]


def _budget_step(actor: Actor, change: Change) -> list[Step]:
    if not any(f.path.startswith("budget") for f in change.fields):
        return []
    return [
        (BUDGET, change, "spec.budget", lambda: _set_budget(actor, change.name, change.desired["budget"]))
    ]


def _sleep_step(actor: Actor, change: Change) -> list[Step]:
    if not any(f.path.startswith("sleep") for f in change.fields):
        return []
    wanted = change.desired["sleep"]

    def set_sleep() -> None:
        sleep.set_sleep_settings(
            actor=actor,
            tenant=_tenant(change.name),
            sleep_when_idle=wanted["whenIdle"],
            sleep_after_inactivity=wanted["afterInactivity"],
        )

    return [(SLEEP, change, "spec.sleep", set_sleep)]


def _set_budget(actor: Actor, name: str, budget: dict[str, Any]) -> None:
    # The webhook URL is a secret and has no place in a manifest: `set_budget` keeps the one set through the
    # API when it is given none.
    budgets.set_budget(
        actor=actor,
        tenant=_tenant(name),
        monthly_amount=budget["monthly"],
        currency=budget["currency"],
        email=budget["email"],
        enforce=budget["enforce"],
    )


def _rate_card_steps(actor: Actor, change: Change) -> list[Step]:
    """A changed spec is a new version; `effectiveUntil` alone retires the newest one; a pruned card is
    withdrawn as Terraform's destroy withdraws one (deleted if no issued invoice used it, else retired)."""
    spec = change.desired
    if change.action == "release":
        return []
    if change.action == "withdraw":
        return [(CARDS, change, "", lambda: rates.withdraw_rate_card(actor=actor, card=_card(change.name)))]

    def create() -> None:
        written = change.document.spec if change.document else spec  # the prices as the manifest spells them
        rates.create_rate_card(
            actor=actor,
            name=change.name,
            effective_from=parse_datetime(spec["effectiveFrom"]),  # type: ignore[arg-type]
            prices=written["prices"],
            currency=spec["currency"],
            tier_multipliers=written.get("tierMultipliers", {}),
            note=spec["note"],
        )

    def retire() -> None:
        until = parse_datetime(spec["effectiveUntil"])
        rates.retire_rate_card(actor=actor, card=_card(change.name), effective_until=until)

    steps: list[Step] = []
    if change.action == "create" or any(f.path != "effectiveUntil" for f in change.fields):
        steps.append((CARDS, change, "spec", create))
    if "effectiveUntil" in spec:
        steps.append((CARDS, change, "spec.effectiveUntil", retire))
    return steps


def _card(name: str) -> RateCard:
    card = state.rate_card_named(name)
    assert card is not None  # planned from it, in this transaction
    return card


def _host_cluster_steps(actor: Actor, change: Change) -> list[Step]:
    spec = change.desired
    if change.action != "update":
        return []

    def update() -> None:
        fleet.update_host_cluster(
            actor=actor,
            host_cluster=HostCluster.objects.get(name=change.name),
            region=spec.get("region"),
            endpoint_base=spec.get("endpointBase"),
            topology_levels=spec.get("topologyLevels"),
        )

    return [(HOSTS, change, "spec", update)]


STEPS = {"Tenant": _tenant_steps, "RateCard": _rate_card_steps, "HostCluster": _host_cluster_steps}


def _quota_classes(change: Change) -> list[str]:
    return [f.path[len("quotas[") : -1] for f in change.fields if f.path.startswith("quotas[")]


def _carry_out(actor: Actor, changes: list[Change], source: str) -> None:
    # The steps run in phases (guarantees shrink before any grows), so two applies would otherwise take the
    # same locks in opposite orders (one shrinks H200 and grows A100, the other the reverse) and deadlock:
    # every lock the steps will take is taken first, in the one global order ("Lock order" in
    # tenants/services/__init__.py).
    quotas.lock_in_order(
        {
            c.name: _quota_classes(c)
            for c in changes
            if c.kind == "Tenant" and c.action in ("update", "delete")
        }
    )
    steps = [
        step for change in changes if change.action != "none" for step in STEPS[change.kind](actor, change)
    ]
    for _, change, path, run in sorted(steps, key=lambda step: step[0]):
        try:
            run()
        except ServiceError as exc:
            where = change.document.problem(path, exc.detail) if change.document else None
            raise ManifestInvalid(
                [where or Problem(source, None, "", f"pruning {change.kind} {change.name}: {exc.detail}")],
                status=exc.status,
            ) from exc


def _record_ownership(actor: Actor, changes: list[Change], source: str, revision: str) -> list[Move]:
    """Record what `source` owns after this apply (`gitops.ownership` says what it may claim); returns the
    changes of ownership. Unchanged desired state costs no writes."""
    rows = {(m.kind, m.name): m for m in ManagedObject.objects.all()}
    moves: list[Move] = []
    for change in changes:
        row = rows.get((change.kind, change.name))
        if change.action in ("delete", "withdraw", "release"):
            if row is not None and row.source == source:
                row.delete()
                moves.append(Move("release", change.kind, change.name, source, None))
            continue
        if row is None:
            claims = change.action == "create" or ownership.adopts(source)
            if not (claims and ownership.may_change_ownership(actor)):
                continue  # an edit through the services, as through the API: it claims nothing
            moves.append(Move("claim", change.kind, change.name, None, source))
        elif row.source != source:  # `plan` let it through: a take-over, which `apply` checked the actor for
            moves.append(Move("take", change.kind, change.name, row.source, source))
        elif row.applied == change.desired and (not revision or row.revision == revision):
            continue
        ManagedObject.objects.update_or_create(
            kind=change.kind,
            name=change.name,
            defaults={
                "source": source,
                "applied": change.desired,
                "revision": revision,
                "applied_at": timezone.now(),
            },
        )
    return moves


@retry_on_conflict
def apply(
    documents: list[Document],
    *,
    actor: Actor,
    source: str,
    prune: bool = False,
    dry_run: bool = False,
    revision: str = "",
    tenants: QuerySet[Tenant] | None = None,
    take_ownership: bool = False,
) -> Result:
    """Apply validated documents as `source`, all or nothing. Returns the changes (made, or for a dry run,
    that would be made); raises `ManifestInvalid` naming file, line, field and reason when anything fails.

    `take_ownership` (platform administrators only) takes declared objects another source owns over for this
    one, instead of refusing them. The services see the source (`Actor.source`), so they let it change the
    fields it declares (`core.declared`).
    """
    if take_ownership and not ownership.may_change_ownership(actor):
        raise PermissionDenied("taking objects over from another source is for platform administrators")
    actor = replace(actor, source=source)
    result = Result([], dry_run, source=source)
    try:
        with transaction.atomic():
            changes = plan(
                documents, source=source, prune=prune, tenants=tenants, take_ownership=take_ownership
            )
            result.changes = [c for c in changes if c.action != "none"]
            # Ownership first: the services then see this source as the one declaring what it takes over.
            result.ownership = _record_ownership(actor, changes, source, revision)
            _carry_out(actor, changes, source)
            ownership.audit_moves(actor, result.ownership, revision)
            if (result.changes or result.ownership) and not dry_run:
                audit.record(
                    actor,
                    "manifests.apply",
                    object_type="manifest_source",
                    object_id=source[:120],
                    after={
                        "revision": revision,
                        "changes": [f"{c.action} {c.kind} {c.name}" for c in result.changes],
                        "ownership": [str(m) for m in result.ownership],
                    },
                )
            if dry_run:
                raise _DryRun
    except _DryRun:
        pass
    return result


def drift(source: str) -> list[Change]:
    """Objects `source` owns whose managed fields were changed since it applied them (through the API, the
    portal …), field by field; the next apply of the same manifests puts them back."""
    found = []
    for row in ManagedObject.objects.filter(source=source):
        obj = state.find(row.kind, row.name)
        if obj is None or (row.kind == "Tenant" and obj.state in state.GONE):
            found.append(Change(row.kind, row.name, "update", [FieldChange("(object)", "applied", None)]))
            continue
        fields = compare(row.applied, state.current(row.kind, obj))
        if fields:
            found.append(Change(row.kind, row.name, "update", fields))
    return found
