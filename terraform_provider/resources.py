"""The resources: a tenant, its quotas, members and service tokens, rate cards, and host clusters.

Each maps to the REST API (docs/api.md) with the API's field names; a refusal is reported with the API's
message. Before a create or an update is planned, `check` asks the API the same question with `dry_run=true`,
so `terraform plan` already shows a quota over capacity or an unknown user, in the API's words.
"""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

from tf.iface import (
    CreateContext,
    DeleteContext,
    ImportContext,
    PlanContext,
    ReadContext,
    Resource,
    UpdateContext,
    UpgradeContext,
)
from tf.schema import Attribute
from tf.types import Bool, Map, Number, String, Unknown
from tf.utils import Diagnostics

from terraform_provider.base import Base, Exists, known, reported, seconds, split_id
from terraform_provider.client import ApiError, path

UNTAINT = (
    "\n\nSlugs are never reused, so a tainted tenant cannot be replaced under its slug: run "
    "`terraform untaint <address>` and apply again, which resumes it and waits until it is ready."
)
TAKEN = (
    "\n\nIf this configuration created it and a failed apply left it tainted: `terraform untaint <address>` "
    "and apply again. Otherwise it was made elsewhere: adopt it with `terraform import <address> {slug}`, or "
    "pick another slug."
)
GONE = "\n\nThat tenant was deleted, and slugs are never reused: pick another slug."
POLL = 0.25  # seconds between looks at a tenant being provisioned or deleted
DEFAULT_TIMEOUT = "10m"


def attr(name: str, type_: Any = None, *, doc: str, **flags: Any) -> Attribute:
    """An attribute; `doc` is required: `terraform providers schema -json` (and so the registry's docs and
    editors) shows it for every attribute."""
    if not doc.strip():
        raise ValueError(f"attribute {name} needs a description")
    return Attribute(name, type_ or String(), description=doc, **flags)


class GpucloudResource(Base, Resource):  # type: ignore[misc]  # tf ships no type information
    """Shared behaviour: no state upgrades yet, and the dry-run check before a plan."""

    def upgrade(self, ctx: UpgradeContext, version: int, old: dict[str, Any]) -> dict[str, Any]:
        return old  # schema version 1 is the first; the default would warn on every plan

    def plan(
        self, ctx: PlanContext, current: dict[str, Any] | None, planned: dict[str, Any]
    ) -> dict[str, Any]:
        unchanged = current is not None and not ctx.changed_fields
        if not unchanged and self.provider.configured and all(known(planned.get(a)) for a in self.checked):
            with reported(ctx.diagnostics, f"planning gpucloud_{self.name}"):
                self.check(planned, current)
        return planned

    checked: tuple[str, ...] = ()  # attributes that must be known before the API can be asked

    def check(self, planned: dict[str, Any], current: dict[str, Any] | None) -> None:
        """Ask the API, with dry_run, whether it would accept this; raises ApiError (or Exists) if not."""

    def refuse_existing(self, url: str, what: str, import_id: str) -> None:
        """A create of something that exists is refused, at plan and at apply, with the import that adopts it
        (the API's PUT would otherwise take it over and overwrite it)."""
        if self.client.find(url) is not None:
            raise Exists(f"gpucloud_{self.name}", what, import_id)


# --------------------------------------------------------------------------------------------- tenant


class TenantResource(GpucloudResource):
    """A tenant: a team with one tenant cluster. Creating it waits until its cluster is ready."""

    name = "tenant"
    attributes = [
        attr("id", doc="the API's id (ten_…)", computed=True),
        attr("slug", doc="1-40 lowercase letters, digits and hyphens", required=True, requires_replace=True),
        attr(
            "display_name",
            doc="a name for people, up to 200 characters (default: the slug)",
            optional=True,
            computed=True,
        ),
        attr(
            "trust_tier",
            doc="isolated, standard or trusted",
            optional=True,
            computed=True,
            default="standard",
        ),
        attr(
            "host_cluster",
            doc="where its cluster runs; gpucloud picks one when unset; changing it replaces the tenant",
            optional=True,
            computed=True,
            requires_replace=True,
        ),
        attr(
            "state",
            doc="pending, provisioning, ready, suspended, failed, deleting or deleted: gpucloud's; a plan "
            "changes it only to resume a failed tenant (failed → ready)",
            computed=True,
        ),
        attr("state_reason", doc="why the tenant failed or is suspended (empty otherwise)", computed=True),
        attr("namespace", doc="the tenant cluster's namespace on its host cluster", computed=True),
        attr("endpoint", doc="the tenant cluster's API endpoint", computed=True),
        attr("create_timeout", doc='how long create waits for "ready" (default 10m)', optional=True),
        attr("delete_timeout", doc='how long destroy waits for "deleted" (default 10m)', optional=True),
    ]
    checked = ("slug",)

    def validate(self, diags: Diagnostics, type_name: str, config: dict[str, Any]) -> None:
        super().validate(diags, type_name, config)
        for field in ("create_timeout", "delete_timeout"):
            value = config.get(field)
            if known(value) and seconds(str(value)) is None:
                diags.add_error(
                    f"{field}: {value!r} is not a duration",
                    'write it like "90s", "10m" or "1h30m"',
                    path=[field],
                )

    def check(self, planned: dict[str, Any], current: dict[str, Any] | None) -> None:
        if current is None:
            try:
                self.client.dry_run("POST", path("tenants"), self.body(planned))
            except ApiError as exc:
                if exc.status == 409 and "slug" in (exc.problem.get("errors") or {}):
                    # Taken by a live tenant (adopt it, or untaint it if a failed apply made it) or by a
                    # deleted one (slugs are never reused).
                    tenant = self.client.find(path("tenants", planned["slug"]))
                    live = tenant is not None and tenant["state"] != "deleted"
                    exc.problem["detail"] += TAKEN.format(slug=planned["slug"]) if live else GONE
                raise
        elif changes := self.changes(current, planned):
            self.client.dry_run("PATCH", path("tenants", planned["slug"]), changes)

    def plan(
        self, ctx: PlanContext, current: dict[str, Any] | None, planned: dict[str, Any]
    ) -> dict[str, Any]:
        planned = super().plan(ctx, current, planned)
        if current is not None and current["state"] == "failed":
            # A failed tenant (a create that failed, then untainted; or one imported): the apply resumes it
            # and waits for it, as create would have. The one computed change a plan shows, because the apply
            # acts on it; a tenant on its way (pending, provisioning) gets there by itself: no change.
            planned |= {"state": "ready", "state_reason": ""}
        elif current is not None and {"display_name", "trust_tier"} & ctx.changed_fields:
            planned |= {"state": Unknown, "state_reason": Unknown}  # a tier change re-reconciles the cluster
        return planned

    @staticmethod
    def changes(current: dict[str, Any], planned: dict[str, Any]) -> dict[str, Any]:
        fields = ("display_name", "trust_tier")
        return {f: planned[f] for f in fields if known(planned.get(f)) and planned[f] != current[f]}

    @staticmethod
    def body(planned: dict[str, Any]) -> dict[str, Any]:
        fields = ("slug", "display_name", "trust_tier", "host_cluster")
        return {f: planned[f] for f in fields if known(planned.get(f))}

    def state_of(self, tenant: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
        cluster = tenant.get("cluster") or {}
        return self.full(
            {
                **{
                    f: tenant.get(f)
                    for f in ("id", "slug", "display_name", "trust_tier", "state", "state_reason")
                },
                "host_cluster": cluster.get("host_cluster"),
                "namespace": cluster.get("namespace"),
                "endpoint": cluster.get("endpoint"),
                "create_timeout": settings.get("create_timeout"),
                "delete_timeout": settings.get("delete_timeout"),
            }
        )

    def wait(self, slug: str, until: set[str], timeout: str | None) -> tuple[dict[str, Any] | None, str]:
        """Poll the tenant until its state is one of `until`, it fails, or the timeout passes."""
        deadline = time.monotonic() + (seconds(timeout or DEFAULT_TIMEOUT) or 600)
        while True:
            tenant = self.client.find(path("tenants", slug))
            if tenant is None or tenant["state"] in until or tenant["state"] == "failed":
                return tenant, ""
            if time.monotonic() > deadline:
                return tenant, f"still {tenant['state']} after {timeout or DEFAULT_TIMEOUT}"
            time.sleep(POLL)

    def create(self, ctx: CreateContext, planned: dict[str, Any]) -> dict[str, Any] | None:
        diags = ctx.diagnostics
        with reported(diags, f"creating tenant {planned['slug']}"):
            self.client.post(path("tenants"), self.body(planned))
        if diags.has_errors():
            return None
        return self.until_ready(diags, planned)

    def until_ready(self, diags: Diagnostics, planned: dict[str, Any]) -> dict[str, Any] | None:
        slug = planned["slug"]
        with reported(diags, f"waiting for tenant {slug}"):
            tenant, late = self.wait(slug, {"ready"}, planned.get("create_timeout"))
            if tenant is None:
                diags.add_error(f"tenant {slug} vanished while it was being created")
                return None
            if tenant["state"] != "ready":
                # Returned with the error, so Terraform keeps it (tainted) rather than losing track of it.
                reason = tenant.get("state_reason") or (tenant.get("cluster") or {}).get("message") or ""
                diags.add_error(
                    f"tenant {slug} did not become ready: {late or tenant['state']}",
                    (reason or "gpucloud gave no reason") + UNTAINT,
                )
            return self.state_of(tenant, planned)
        return None

    def read(self, ctx: ReadContext, current: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, f"reading tenant {current['slug']}"):
            tenant = self.client.find(path("tenants", current["slug"]))
            if tenant is None or tenant["state"] == "deleted":
                return None  # gone: Terraform plans to create it again
            return self.state_of(tenant, current)
        return current

    def update(
        self, ctx: UpdateContext, current: dict[str, Any], planned: dict[str, Any]
    ) -> dict[str, Any] | None:
        changes = self.changes(current, planned)
        slug = current["slug"]
        with reported(ctx.diagnostics, f"updating tenant {slug}"):
            tenant = self.client.patch(path("tenants", slug), changes) if changes else None
            if current["state"] == "failed":
                if self.client.get(path("tenants", slug))["state"] == "failed":
                    self.client.post(path("tenants", slug, "resume"))
                return self.until_ready(ctx.diagnostics, planned)
            tenant = tenant or self.client.get(path("tenants", slug))
            return self.state_of(tenant, planned)
        return current

    def delete(self, ctx: DeleteContext, current: dict[str, Any]) -> None:
        slug = current["slug"]
        with reported(ctx.diagnostics, f"deleting tenant {slug}"):
            tenant = self.client.find(path("tenants", slug))
            if tenant is not None and tenant["state"] not in ("deleting", "deleted"):
                self.client.delete(path("tenants", slug))
            tenant, late = self.wait(slug, {"deleted"}, current.get("delete_timeout"))
            if late:
                ctx.diagnostics.add_error(f"tenant {slug} was not deleted: {late}")
            elif tenant is not None and tenant["state"] == "failed":
                ctx.diagnostics.add_error(
                    f"tenant {slug} failed while being deleted", tenant.get("state_reason", "")
                )

    def import_(self, ctx: ImportContext, id: str) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, f"importing tenant {id}"):
            tenant = self.client.find(path("tenants", id))
            if tenant is None or tenant["state"] == "deleted":
                ctx.diagnostics.add_error(f"there is no tenant {id!r} (or it is deleted)")
                return None
            return self.state_of(tenant, {})
        return None


# --------------------------------------------------------------------------------------------- quota


class QuotaResource(GpucloudResource):
    """A tenant's quota of one GPU class. Admission (capacity, trust tier) is the API's, at plan and apply."""

    name = "quota"
    attributes = [
        attr("id", doc="<tenant>/<gpu_class>", computed=True),
        attr("tenant", doc="the tenant's slug", required=True, requires_replace=True),
        attr(
            "gpu_class",
            doc="a GPU class name, e.g. h200-141gb (GET /api/v1/gpu-classes/)",
            required=True,
            requires_replace=True,
        ),
        attr(
            "guaranteed",
            Number(),
            doc="units always available to the tenant (admitted against capacity)",
            required=True,
        ),
        attr(
            "burst",
            Number(),
            doc="units above guaranteed it may borrow",
            optional=True,
            computed=True,
            default=0,
        ),
        attr("lendable", Number(), doc="units of its guarantee others may borrow; null = all", optional=True),
        attr("weight", Number(), doc="fair-share weight", optional=True, computed=True, default=1),
    ]
    checked = ("tenant", "gpu_class", "guaranteed", "burst", "weight")
    values = ("guaranteed", "burst", "lendable", "weight")

    def url(self, state: dict[str, Any]) -> str:
        return path("tenants", state["tenant"], "quotas", state["gpu_class"])

    def body(self, planned: dict[str, Any]) -> dict[str, Any]:
        return {f: planned.get(f) for f in self.values if planned.get(f) is not None or f == "lendable"}

    def where(self, state: dict[str, Any]) -> str:
        return f"{state['tenant']}/{state['gpu_class']}"

    def check(self, planned: dict[str, Any], current: dict[str, Any] | None) -> None:
        if self.client.find(path("tenants", planned["tenant"])) is None:
            return  # created in this same apply: the API answers at apply time
        if current is None:
            self.refuse_existing(self.url(planned), f"quota {self.where(planned)}", self.where(planned))
        self.client.dry_run("PUT", self.url(planned), self.body(planned))

    def state_of(self, tenant: str, quota: dict[str, Any]) -> dict[str, Any]:
        return self.full(
            {
                "id": f"{tenant}/{quota['gpu_class']}",
                "tenant": tenant,
                **{f: quota[f] for f in ("gpu_class", *self.values)},
            }
        )

    def create(self, ctx: CreateContext, planned: dict[str, Any]) -> dict[str, Any] | None:
        where = self.where(planned)
        with reported(ctx.diagnostics, f"setting quota {where}"):
            self.refuse_existing(self.url(planned), f"quota {where}", where)
            return self.state_of(planned["tenant"], self.client.put(self.url(planned), self.body(planned)))
        return None

    def read(self, ctx: ReadContext, current: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, f"reading quota {current['id']}"):
            quota = self.client.find(self.url(current))
            return None if quota is None else self.state_of(current["tenant"], quota)
        return current

    def update(
        self, ctx: UpdateContext, current: dict[str, Any], planned: dict[str, Any]
    ) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, f"setting quota {current['id']}"):
            return self.state_of(planned["tenant"], self.client.put(self.url(planned), self.body(planned)))
        return current

    def delete(self, ctx: DeleteContext, current: dict[str, Any]) -> None:
        with reported(ctx.diagnostics, f"removing quota {current['id']}"):
            self.client.delete(self.url(current))

    def import_(self, ctx: ImportContext, id: str) -> dict[str, Any] | None:
        parts = split_id(ctx.diagnostics, id, ["tenant", "gpu_class"])
        if parts is None:
            return None
        with reported(ctx.diagnostics, f"importing quota {id}"):
            quota = self.client.find(path("tenants", parts[0], "quotas", parts[1]))
            if quota is None:
                ctx.diagnostics.add_error(f"tenant {parts[0]!r} has no quota of {parts[1]!r}")
                return None
            return self.state_of(parts[0], quota)
        return None


# --------------------------------------------------------------------------------------------- member


class MemberResource(GpucloudResource):
    """A user's role in a tenant."""

    name = "member"
    attributes = [
        attr("id", doc="<tenant>/<user>", computed=True),
        attr("tenant", doc="the tenant's slug", required=True, requires_replace=True),
        attr("user", doc="the user's username", required=True, requires_replace=True),
        attr("role", doc="owner, admin, member, viewer or billing", required=True),
        attr("source", doc="manual, sso or token: how the role was given", computed=True),
    ]
    checked = ("tenant", "user", "role")

    def url(self, state: dict[str, Any]) -> str:
        return path("tenants", state["tenant"], "members", state["user"])

    def check(self, planned: dict[str, Any], current: dict[str, Any] | None) -> None:
        if self.client.find(path("tenants", planned["tenant"])) is None:
            return
        if current is None:
            where = f"{planned['tenant']}/{planned['user']}"
            self.refuse_existing(self.url(planned), f"{planned['user']}'s role in {planned['tenant']}", where)
        body = {"username": planned["user"], "role": planned["role"]}
        self.client.dry_run("POST", path("tenants", planned["tenant"], "members"), body)

    def state_of(self, tenant: str, member: dict[str, Any]) -> dict[str, Any]:
        user = member["username"]
        return self.full(
            {
                "id": f"{tenant}/{user}",
                "tenant": tenant,
                "user": user,
                "role": member["role"],
                "source": member["source"],
            }
        )

    def create(self, ctx: CreateContext, planned: dict[str, Any]) -> dict[str, Any] | None:
        where = f"{planned['tenant']}/{planned['user']}"
        with reported(ctx.diagnostics, f"adding member {where}"):
            self.refuse_existing(self.url(planned), f"{planned['user']}'s role in {planned['tenant']}", where)
            body = {"username": planned["user"], "role": planned["role"]}
            return self.state_of(
                planned["tenant"], self.client.post(path("tenants", planned["tenant"], "members"), body)
            )
        return None

    def read(self, ctx: ReadContext, current: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, f"reading member {current['id']}"):
            member = self.client.find(self.url(current))
            return None if member is None else self.state_of(current["tenant"], member)
        return current

    def update(
        self, ctx: UpdateContext, current: dict[str, Any], planned: dict[str, Any]
    ) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, f"changing the role of {current['id']}"):
            return self.state_of(
                current["tenant"], self.client.patch(self.url(current), {"role": planned["role"]})
            )
        return current

    def delete(self, ctx: DeleteContext, current: dict[str, Any]) -> None:
        with reported(ctx.diagnostics, f"removing member {current['id']}"):
            tenant = self.client.find(path("tenants", current["tenant"]))
            if tenant is not None and tenant["state"] not in ("deleting", "deleted"):
                self.client.delete(self.url(current))

    def import_(self, ctx: ImportContext, id: str) -> dict[str, Any] | None:
        parts = split_id(ctx.diagnostics, id, ["tenant", "user"])
        if parts is None:
            return None
        with reported(ctx.diagnostics, f"importing member {id}"):
            member = self.client.find(path("tenants", parts[0], "members", parts[1]))
            if member is None:
                ctx.diagnostics.add_error(f"{parts[1]!r} has no role in tenant {parts[0]!r}")
                return None
            return self.state_of(parts[0], member)
        return None


# --------------------------------------------------------------------------------------------- service token


class ServiceTokenResource(GpucloudResource):
    """A tenant's service token. Its text (`token`) is known only to the Terraform run that created it."""

    name = "service_token"
    attributes = [
        attr("id", doc="the API's id (tok_…)", computed=True),
        attr("tenant", doc="the tenant's slug", required=True, requires_replace=True),
        attr("name", doc="the token's name, unique in the tenant", required=True, requires_replace=True),
        attr(
            "scope",
            doc="read, write or admin",
            optional=True,
            computed=True,
            default="read",
            requires_replace=True,
        ),
        attr("expires_at", doc="ISO 8601; never when unset", optional=True, requires_replace=True),
        attr("prefix", doc="the token's visible prefix", computed=True),
        attr("token", doc="the secret, shown once by the API", computed=True, sensitive=True),
    ]

    def state_of(self, tenant: str, row: dict[str, Any], prior: dict[str, Any]) -> dict[str, Any]:
        return self.full(
            {
                **{f: row.get(f) for f in ("id", "name", "scope", "prefix")},
                "tenant": tenant,
                "expires_at": prior.get("expires_at") if prior.get("expires_at") else row.get("expires_at"),
                "token": row.get("token") or prior.get("token"),
            }
        )

    def create(self, ctx: CreateContext, planned: dict[str, Any]) -> dict[str, Any] | None:
        body = {f: planned[f] for f in ("name", "scope", "expires_at") if known(planned.get(f))}
        with reported(ctx.diagnostics, f"making a service token for {planned['tenant']}"):
            row = self.client.post(path("tenants", planned["tenant"], "tokens"), body)
            return self.state_of(planned["tenant"], row, planned)
        return None

    def read(self, ctx: ReadContext, current: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, f"reading service token {current['id']}"):
            row = self.client.find(path("tenants", current["tenant"], "tokens", current["id"]))
            if row is None or row.get("revoked_at"):
                return None
            return self.state_of(current["tenant"], row, current)
        return current

    def update(
        self, ctx: UpdateContext, current: dict[str, Any], planned: dict[str, Any]
    ) -> dict[str, Any] | None:
        return planned  # every attribute replaces the token; nothing is changed in place

    def delete(self, ctx: DeleteContext, current: dict[str, Any]) -> None:
        with reported(ctx.diagnostics, f"revoking service token {current['id']}"):
            self.client.delete(path("tenants", current["tenant"], "tokens", current["id"]))

    def import_(self, ctx: ImportContext, id: str) -> dict[str, Any] | None:
        parts = split_id(ctx.diagnostics, id, ["tenant", "token id"])
        if parts is None:
            return None
        with reported(ctx.diagnostics, f"importing service token {id}"):
            row = self.client.find(path("tenants", parts[0], "tokens", parts[1]))
            if row is None or row.get("revoked_at"):
                ctx.diagnostics.add_error(f"tenant {parts[0]!r} has no live service token {parts[1]!r}")
                return None
            return self.state_of(parts[0], row, {})  # the secret was shown once: it stays unknown (null)
        return None


# --------------------------------------------------------------------------------------------- rate card


def numbers(prices: dict[str, str]) -> dict[str, float]:
    """The API writes prices as strings ("4.500000"); Terraform compares them as numbers (4.5), so a card
    imported or read back equals its configuration however the number was spelled."""
    return {k: float(Decimal(v)) for k, v in prices.items()}


class RateCardResource(GpucloudResource):
    """A rate card: prices per GPU-hour. Cards are versions: any change makes a new one (a replacement).
    Destroying one deletes it, or, when issued invoices used it (they keep its prices), retires it: it no
    longer applies from then on."""

    name = "rate_card"
    attributes = [
        attr("id", doc="the API's id (rc_…)", computed=True),
        attr("version", Number(), doc="the card's version number, given by gpucloud", computed=True),
        attr("effective_from", doc="ISO 8601 time", required=True, requires_replace=True),
        attr(
            "prices",
            Map(Number()),
            doc="GPU class → price per GPU-hour",
            required=True,
            requires_replace=True,
        ),
        attr(
            "currency",
            doc="ISO 4217 code of the prices (default USD)",
            optional=True,
            computed=True,
            default="USD",
            requires_replace=True,
        ),
        attr(
            "tier_multipliers",
            Map(Number()),
            doc="trust tier (isolated, standard, trusted) → factor on the prices (default 1)",
            optional=True,
            computed=True,
            requires_replace=True,
        ),
        attr(
            "note",
            doc="free text, up to 200 characters",
            optional=True,
            computed=True,
            default="",
            requires_replace=True,
        ),
        attr(
            "effective_until",
            doc="set once the card is retired (ISO 8601 time): it no longer applies from then on",
            computed=True,
        ),
    ]

    def state_of(self, card: dict[str, Any], prior: dict[str, Any]) -> dict[str, Any]:
        effective = prior.get("effective_from") or card["effective_from"]
        if effective.replace("Z", "+00:00") != card["effective_from"].replace("Z", "+00:00"):
            effective = card["effective_from"]
        return self.full(
            {
                **{f: card.get(f) for f in ("id", "version", "currency", "note", "effective_until")},
                "effective_from": effective,
                "prices": numbers(card["prices"]),
                "tier_multipliers": numbers(card["tier_multipliers"]),
            }
        )

    def create(self, ctx: CreateContext, planned: dict[str, Any]) -> dict[str, Any] | None:
        fields = ("effective_from", "prices", "currency", "tier_multipliers", "note")
        body = {f: planned[f] for f in fields if known(planned.get(f))}
        with reported(ctx.diagnostics, "creating a rate card"):
            return self.state_of(self.client.post(path("rate-cards"), body), planned)
        return None

    def read(self, ctx: ReadContext, current: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, f"reading rate card {current['id']}"):
            card = self.client.find(path("rate-cards", current["id"]))
            return None if card is None else self.state_of(card, current)
        return current

    def update(
        self, ctx: UpdateContext, current: dict[str, Any], planned: dict[str, Any]
    ) -> dict[str, Any] | None:
        return planned  # every attribute replaces the card

    def delete(self, ctx: DeleteContext, current: dict[str, Any]) -> None:
        card = current["id"]
        with reported(ctx.diagnostics, f"destroying rate card {card}"):
            try:
                self.client.delete(path("rate-cards", card))
            except ApiError as exc:
                if exc.problem.get("type") != "/problems/rate-card-in-use":
                    raise
                retired = self.client.post(path("rate-cards", card, "retire"), {})
                ctx.diagnostics.add_warning(
                    f"rate card {card} (version {current['version']}) is retired, not deleted",
                    f"issued invoices used it and keep its prices; it no longer applies from "
                    f"{retired['effective_until']}",
                )

    def import_(self, ctx: ImportContext, id: str) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, f"importing rate card {id}"):
            card = self.client.find(path("rate-cards", id))
            if card is None:
                ctx.diagnostics.add_error(f"there is no rate card {id!r}")
                return None
            return self.state_of(card, {})
        return None


# --------------------------------------------------------------------------------------------- host cluster


class HostClusterResource(GpucloudResource):
    """A Kubernetes host cluster, registered with its kubeconfig (checked against the cluster, stored
    encrypted, never read back). A new kubeconfig, scheduler, namespace, region or endpoint base changes it in
    place (each checked by gpucloud first); `cordoned` keeps new tenants off it; `retired` takes it out of
    service for good and keeps its history (only when no tenant and no running pod is left on it). Destroying
    it deletes it only when no tenant is on it and no history refers to it: gpucloud's answer names the
    tenants (drain it first) or the history (retire it instead) otherwise."""

    name = "host_cluster"
    attributes = [
        attr("id", doc="the API's id (hc_…)", computed=True),
        attr("name", doc="a DNS-safe name, unique", required=True, requires_replace=True),
        attr(
            "kubeconfig",
            doc="the kubeconfig's text, inline credentials only; changing it rotates it (checked first)",
            required=True,
            sensitive=True,
        ),
        attr("scheduler", doc="kueue or kai; changes only with no tenants on it", required=True),
        attr("region", doc="where it is", optional=True, computed=True, default=""),
        attr(
            "endpoint_base",
            doc="tenant API servers are served under this URL's host (default: from the name)",
            optional=True,
            computed=True,
        ),
        attr(
            "vcluster_mode",
            doc="helmrelease (Flux) or platform (vCluster Platform)",
            optional=True,
            computed=True,
            default="helmrelease",
            requires_replace=True,
        ),
        attr(
            "watch_tenants",
            doc="a namespace whose Tenant and RateCard custom resources gpucloud applies (empty: none)",
            optional=True,
            computed=True,
            default="",
        ),
        attr(
            "cordoned",
            Bool(),
            doc="true: no new tenant is placed on it",
            optional=True,
            computed=True,
            default=False,
        ),
        attr("cordon_reason", doc="why it is cordoned", optional=True, computed=True, default=""),
        attr(
            "retired",
            Bool(),
            doc="true: out of service for good, its history kept (needs cordoned = true; refused while a "
            "tenant or a running pod is on it); false again puts it back in service",
            optional=True,
            computed=True,
            default=False,
        ),
        attr("state", doc="ready, unreachable or error (gpucloud's last pass), or retired", computed=True),
        attr("server_version", doc="the Kubernetes version it runs", computed=True),
        attr("nodes", Number(), doc="GPU nodes present (not gone)", computed=True),
        attr("gpus", Number(), doc="GPUs of the nodes present", computed=True),
    ]
    checked = ("name",)
    changeable = ("scheduler", "region", "endpoint_base", "watch_tenants")

    def validate(self, diags: Diagnostics, type_name: str, config: dict[str, Any]) -> None:
        super().validate(diags, type_name, config)
        if config.get("retired") is True and config.get("cordoned") is not True:
            diags.add_error(
                "retired = true needs cordoned = true",
                "a retired host cluster takes no tenants: gpucloud cordons it; say so in the configuration "
                "(with cordon_reason, which the retire keeps)",
                path=["cordoned"],
            )

    def check(self, planned: dict[str, Any], current: dict[str, Any] | None) -> None:
        if current is None:
            self.refuse_existing(
                path("host-clusters", planned["name"]), f"host cluster {planned['name']}", planned["name"]
            )
        elif self._retiring(current, planned):
            # gpucloud answers the retire exactly (tenants left, pods running), and keeps nothing.
            self.client.dry_run("POST", path("host-clusters", current["name"], "retire"), {})

    def plan(
        self, ctx: PlanContext, current: dict[str, Any] | None, planned: dict[str, Any]
    ) -> dict[str, Any]:
        planned = super().plan(ctx, current, planned)
        if current is not None and self._retiring(current, planned):
            planned["state"] = "retired"
        elif current is not None and current.get("retired") and planned.get("retired") is False:
            planned["state"] = Unknown  # back in service: its next pass says whether it answers
        return planned

    @staticmethod
    def _retiring(current: dict[str, Any], planned: dict[str, Any]) -> bool:
        return planned.get("retired") is True and not current.get("retired")

    def _retire(self, name: str, planned: dict[str, Any], current: dict[str, Any] | None) -> None:
        """Retire after the cordon (whose reason it keeps); un-retire before an uncordon (refused while
        retired)."""
        was = current is not None and bool(current.get("retired"))
        if planned.get("retired") is True and not was:
            self._cordon(name, planned, current)
            self.client.post(path("host-clusters", name, "retire"), {})
            return
        if was and planned.get("retired") is False:
            self.client.post(path("host-clusters", name, "unretire"), {})
        self._cordon(name, planned, current)

    def state_of(self, row: dict[str, Any], prior: dict[str, Any]) -> dict[str, Any]:
        return self.full(
            {
                **{
                    f: row.get(f)
                    for f in ("id", "name", "scheduler", "region", "endpoint_base", "vcluster_mode", "state")
                },
                "kubeconfig": prior.get("kubeconfig"),  # never returned: what this configuration gave
                "watch_tenants": row.get("tenants_namespace", ""),
                "cordoned": row.get("cordoned", False),
                "cordon_reason": row.get("cordon_reason", ""),
                "retired": row.get("state") == "retired",
                "server_version": row.get("server_version"),
                "nodes": row.get("nodes"),
                "gpus": row.get("gpus"),
            }
        )

    def _cordon(self, name: str, planned: dict[str, Any], current: dict[str, Any] | None) -> None:
        wanted = bool(planned.get("cordoned"))
        reason = planned.get("cordon_reason") if known(planned.get("cordon_reason")) else ""
        was = current is not None and bool(current.get("cordoned"))
        if wanted and (not was or (current or {}).get("cordon_reason") != reason):
            self.client.post(path("host-clusters", name, "cordon"), {"reason": reason or ""})
        elif was and not wanted:
            self.client.post(path("host-clusters", name, "uncordon"), {})

    def create(self, ctx: CreateContext, planned: dict[str, Any]) -> dict[str, Any] | None:
        name = planned["name"]
        fields = (
            "name",
            "kubeconfig",
            "scheduler",
            "region",
            "endpoint_base",
            "vcluster_mode",
            "watch_tenants",
        )
        body = {f: planned[f] for f in fields if known(planned.get(f))}
        with reported(ctx.diagnostics, f"registering host cluster {name}"):
            self.refuse_existing(path("host-clusters", name), f"host cluster {name}", name)
            row = self.client.post(path("host-clusters"), body)
            if planned.get("cordoned") or planned.get("retired"):
                self._retire(name, planned, None)
                row = self.client.get(path("host-clusters", name))
            return self.state_of(row, planned)
        return None

    def read(self, ctx: ReadContext, current: dict[str, Any]) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, f"reading host cluster {current['name']}"):
            row = self.client.find(path("host-clusters", current["name"]))
            return None if row is None else self.state_of(row, current)
        return current

    def update(
        self, ctx: UpdateContext, current: dict[str, Any], planned: dict[str, Any]
    ) -> dict[str, Any] | None:
        name = current["name"]
        changes = {
            f: planned[f] for f in self.changeable if known(planned.get(f)) and planned[f] != current.get(f)
        }
        if planned.get("kubeconfig") != current.get("kubeconfig"):
            changes["kubeconfig"] = planned["kubeconfig"]
        with reported(ctx.diagnostics, f"updating host cluster {name}"):
            if changes:
                self.client.patch(path("host-clusters", name), changes)
            self._retire(name, planned, current)
            return self.state_of(self.client.get(path("host-clusters", name)), planned)
        return current

    def delete(self, ctx: DeleteContext, current: dict[str, Any]) -> None:
        with reported(ctx.diagnostics, f"deleting host cluster {current['name']}"):
            self.client.delete(path("host-clusters", current["name"]))

    def import_(self, ctx: ImportContext, id: str) -> dict[str, Any] | None:
        with reported(ctx.diagnostics, f"importing host cluster {id}"):
            row = self.client.find(path("host-clusters", id))
            if row is None:
                ctx.diagnostics.add_error(f"there is no host cluster {id!r}")
                return None
            # The kubeconfig is never read back: the next plan shows it as a change, and applying it rotates
            # the stored one to the configuration's (checked against the cluster first).
            return self.state_of(row, {})
        return None


RESOURCES = [
    TenantResource,
    QuotaResource,
    MemberResource,
    ServiceTokenResource,
    RateCardResource,
    HostClusterResource,
]
