"""Objects as manifest specs: what is in the database now (`current`), what a manifest asks for (`desired`),
both in one canonical form so that comparing them is `==`, and `export`, which writes the current state as
manifests `apply` accepts unchanged.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.utils.dateparse import parse_datetime

from billing.models import Budget, RateCard
from fleet.models import HostCluster
from gitops.manifests import API_VERSION, Document
from tenants import invitations
from tenants.models import Invitation, Membership, Tenant

User = get_user_model()
GONE = (Tenant.State.DELETING, Tenant.State.DELETED)


class Unresolvable(Exception):
    """A manifest value the database cannot make sense of (an unparseable date); `path` names the field."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(reason)
        self.path, self.reason = path, reason


def decimal_text(value: Any) -> str:
    """One spelling per number ("2.50" and "2.5" are both "2.5"), so equal amounts compare equal."""
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return str(value)
    return format(number.normalize(), "f")


def _quota(quota: dict[str, Any]) -> dict[str, Any]:
    return {
        "gpuClass": quota["gpuClass"],
        "guaranteed": quota["guaranteed"],
        "burst": quota.get("burst", 0),
        "lendable": quota.get("lendable"),
        "weight": quota.get("weight", 1),
    }


def _budget(budget: dict[str, Any]) -> dict[str, Any]:
    return {
        "monthly": decimal_text(budget["monthly"]),
        "currency": budget.get("currency", "USD"),
        "enforce": budget.get("enforce", False),
        "email": budget.get("email", ""),
    }


def _sleep(sleep: dict[str, Any]) -> dict[str, Any]:
    return {"whenIdle": sleep.get("whenIdle", False), "afterInactivity": sleep.get("afterInactivity", "")}


def member_key(user: str) -> str:
    """Who a manifest's `user` is: the username of an account (found by username, or by its e-mail address
    when exactly one active account has it: `tenants.invitations.existing_user`, the portal's rule), else the
    e-mail address in lowercase (an invitation)."""
    if "@" not in user:
        return user
    found = invitations.existing_user(user)
    return found.get_username() if found is not None else user.lower()


def _members(members: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(
        ({"user": member_key(m["user"]), "role": m["role"]} for m in members), key=lambda m: m["user"]
    )


def desired(document: Document) -> dict[str, Any]:
    """The manifest's spec in canonical form: defaults filled in, lists sorted, people resolved. Fields the
    manifest leaves out are left out (they are not managed)."""
    spec = dict(document.spec)
    if document.kind == "Tenant":
        if "quotas" in spec:
            spec["quotas"] = sorted((_quota(q) for q in spec["quotas"]), key=lambda q: q["gpuClass"])
        if "members" in spec:
            spec["members"] = _members(spec["members"])
        if "budget" in spec:
            spec["budget"] = _budget(spec["budget"])
        if "sleep" in spec:
            spec["sleep"] = _sleep(spec["sleep"])
    elif document.kind == "RateCard":
        for key in ("effectiveFrom", "effectiveUntil"):
            if key in spec:
                spec[key] = _iso(_moment(spec[key], f"spec.{key}"))
        spec["currency"] = spec.get("currency", "USD")
        spec["prices"] = {k: decimal_text(v) for k, v in sorted(spec["prices"].items())}
        spec["tierMultipliers"] = {
            k: decimal_text(v) for k, v in sorted(spec.get("tierMultipliers", {}).items())
        }
        spec["note"] = spec.get("note", "")
    return spec


def _moment(text: str, path: str) -> datetime:
    try:
        moment = parse_datetime(text)
    except ValueError:  # well formed, but no such day or hour
        moment = None
    if moment is None or moment.tzinfo is None:
        raise Unresolvable(path, f"{text!r} is not a date-time with a time zone, e.g. 2026-01-01T00:00:00Z")
    return moment


def _iso(moment: Any) -> str:
    return str(moment.astimezone(UTC).isoformat().replace("+00:00", "Z"))


def tenant_spec(tenant: Tenant) -> dict[str, Any]:
    members = [
        {"user": m.user.get_username(), "role": m.role}
        for m in tenant.memberships.select_related("user").filter(source=Membership.Source.MANUAL)
    ] + [
        {"user": i.login.lower(), "role": i.role}
        for i in Invitation.objects.filter(tenant=tenant, accepted_at=None, login__contains="@")
    ]
    spec: dict[str, Any] = {
        "displayName": tenant.display_name,
        "trustTier": tenant.trust_tier,
        "hostCluster": tenant.cluster.host_cluster.name,
        "members": sorted(members, key=lambda m: m["user"]),
        "quotas": [
            {
                "gpuClass": q.gpu_class.name,
                "guaranteed": q.guaranteed,
                "burst": q.burst,
                "lendable": q.lendable,
                "weight": q.weight,
            }
            for q in tenant.quotas.select_related("gpu_class").order_by("gpu_class__name")
        ],
        "sleep": {"whenIdle": tenant.sleep_when_idle, "afterInactivity": tenant.sleep_after_inactivity},
    }
    budget = Budget.objects.filter(tenant=tenant).first()
    if budget is not None:
        spec["budget"] = {
            "monthly": decimal_text(budget.monthly_amount),
            "currency": budget.currency,
            "enforce": budget.enforce,
            "email": budget.email,
        }
    return spec


def rate_card_named(name: str) -> RateCard | None:
    """The newest card written under this name; `v<N>` also finds the unnamed card of version N."""
    card = RateCard.objects.filter(name=name).order_by("-version").first()
    match = re.fullmatch(r"v(\d+)", name)
    if card is None and match:
        card = RateCard.objects.filter(name="", version=int(match.group(1))).first()
    return card


def rate_card_spec(card: RateCard) -> dict[str, Any]:
    """The card as a spec; `effectiveUntil` only once it is retired (a spec without it does not manage it)."""
    until = {"effectiveUntil": _iso(card.effective_until)} if card.effective_until else {}
    return {
        "effectiveFrom": _iso(card.effective_from),
        **until,
        "currency": card.currency,
        "prices": {k: decimal_text(v) for k, v in sorted(card.prices.items())},
        "tierMultipliers": {k: decimal_text(v) for k, v in sorted(card.tier_multipliers.items())},
        "note": card.note,
    }


def host_cluster_spec(host_cluster: HostCluster) -> dict[str, Any]:
    return {
        "driver": host_cluster.driver,
        "scheduler": host_cluster.scheduler,
        "vclusterMode": host_cluster.vcluster_mode,
        "region": host_cluster.region,
        "endpointBase": host_cluster.endpoint_base,
        "topologyLevels": list(host_cluster.topology_levels),
    }


def find(kind: str, name: str, tenants: QuerySet[Tenant] | None = None) -> Any:
    """The object a manifest of this kind and name is about, or None. `tenants` limits which tenants exist
    for the caller (an API caller's visible tenants: another tenant is "not found", as everywhere)."""
    if kind == "Tenant":
        scope = Tenant.objects.all() if tenants is None else tenants
        return scope.select_related("cluster__host_cluster").filter(slug=name).first()
    if kind == "RateCard":
        return rate_card_named(name)
    return HostCluster.objects.filter(name=name).first()


def current(kind: str, obj: Any) -> dict[str, Any]:
    """The object's whole spec in canonical form."""
    if kind == "Tenant":
        return tenant_spec(obj)
    if kind == "RateCard":
        return rate_card_spec(obj)
    return host_cluster_spec(obj)


def manifest(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


def export(tenant: str | None = None) -> list[dict[str, Any]]:
    """The current state as manifests: host clusters, rate cards (each name's newest card), live tenants.

    With `tenant`, only that tenant. `apply` of the result changes nothing.
    """
    tenants = Tenant.objects.exclude(state__in=GONE).select_related("cluster__host_cluster").order_by("slug")
    if tenant is not None:
        return [manifest("Tenant", t.slug, tenant_spec(t)) for t in tenants.filter(slug=tenant)]
    documents = [
        manifest("HostCluster", h.name, host_cluster_spec(h)) for h in HostCluster.objects.order_by("name")
    ]
    named: dict[str, RateCard] = {}
    for card in RateCard.objects.order_by("version"):
        named[card.name or f"v{card.version}"] = card
    documents += [manifest("RateCard", name, rate_card_spec(card)) for name, card in named.items()]
    return documents + [manifest("Tenant", t.slug, tenant_spec(t)) for t in tenants]
