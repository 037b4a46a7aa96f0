"""The portal's forms carry what people type to the services; they check nothing the services check.

Fields are plain text where the API takes numbers, so a wrong value reaches the service and comes back with
the API's own message ("guaranteed must be a whole number, not 'ten'"), shown by the field.
"""

from __future__ import annotations

from typing import Any

from django import forms

from billing import money
from fleet.models import GpuClass
from fleet.selectors import serving_host_clusters
from tenants import tiers
from tenants.capacity import classes_offered
from tenants.models import ApiToken, Membership, Quota, Tenant
from tenants.selectors import quotas_of
from tenants.tokens import SCOPES

# Counts are typed as text: what is not a whole number reaches the service, which says so.
NUMBER = forms.TextInput({"inputmode": "numeric"})


def whole(value: str, default: int | None = 0) -> Any:
    """A typed count as an int; blank is `default`; anything else goes to the service as typed."""
    value = (value or "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        return value


def _choices_of_host_clusters() -> list[tuple[str, str]]:
    """Where a tenant or a gang can go: the host clusters in service (a retired one takes nothing)."""
    names = serving_host_clusters().values_list("name", flat=True)
    return [("", "Automatic: the ready host cluster with the most free GPUs"), *((n, n) for n in names)]


KIND_NAMES: dict[str, str] = {
    GpuClass.Kind.WHOLE: "Whole GPUs",
    GpuClass.Kind.MIG: "MIG slices",
    GpuClass.Kind.SHARED: "Time-sliced shares",
    GpuClass.Kind.FRACTION: "HAMi fractions",
}


def _choices_of_classes(blank: str, tenant: Tenant | None = None) -> list[tuple[str, Any]]:
    """The one GPU-class menu of every form: classes of models in service in the fleet (`classes_offered`).

    For a tenant: the classes its trust tier allows on its host cluster, and those it holds already. With no
    tenant yet (a new one, a what-if), grouped by kind, each group saying which trust tiers may hold it.
    """
    if tenant is not None:
        held = quotas_of(tenant).values_list("gpu_class__name", flat=True)
        classes = classes_offered(
            trust_tier=tenant.trust_tier, host_cluster=tenant.cluster.host_cluster, keep=held
        )
        return [("", blank), *((c.name, f"{c.name} ({c.kind})") for c in classes)]
    groups: dict[str, list[tuple[str, str]]] = {kind: [] for kind in GpuClass.Kind.values}
    for gpu_class in classes_offered():
        groups[gpu_class.kind].append((gpu_class.name, gpu_class.name))
    return [("", blank), *((_kind_label(kind), names) for kind, names in groups.items() if names)]


def _kind_label(kind: str) -> str:
    """Which trust tiers may hold a kind of class (tenants.tiers), e.g. "MIG slices: standard and trusted
    tenants"."""
    allowed = [tier for tier, kinds in tiers.KINDS.items() if kind in kinds]
    who = "every trust tier" if len(allowed) == len(tiers.KINDS) else " and ".join(allowed) + " tenants"
    return f"{KIND_NAMES[kind]}: {who}"


def _choose(form: forms.Form, name: str, choices: list[tuple[str, Any]]) -> None:
    """Fill a choice field when the form is made: the fleet and the catalog change while the server runs."""
    field = form.fields[name]
    assert isinstance(field, forms.ChoiceField)
    field.choices = choices


class TenantForm(forms.Form):
    slug = forms.CharField(
        required=False,
        label="Slug",
        help_text="Lowercase letters, digits and hyphens; names the cluster and never changes.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false", "autofocus": True}),
    )
    display_name = forms.CharField(required=False, label="Display name", help_text="Blank: the slug.")
    trust_tier = forms.ChoiceField(
        label="Trust tier",
        choices=Tenant.TrustTier.choices,
        initial=Tenant.TrustTier.STANDARD,
        help_text="Isolated tenants get dedicated GPUs only; see docs/permissions.md.",
    )
    host_cluster = forms.ChoiceField(label="Host cluster", required=False)
    gpu_class = forms.ChoiceField(label="GPU class of the first quota", required=False)
    guaranteed = forms.CharField(required=False, label="Guaranteed", widget=NUMBER)
    burst = forms.CharField(required=False, label="Burst", widget=NUMBER)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _choose(self, "host_cluster", _choices_of_host_clusters())
        _choose(self, "gpu_class", _choices_of_classes("None for now"))


class QuotaForm(forms.Form):
    gpu_class = forms.ChoiceField(label="GPU class")
    guaranteed = forms.CharField(required=False, label="Guaranteed", widget=NUMBER)
    burst = forms.CharField(required=False, label="Burst", widget=NUMBER)
    lendable = forms.CharField(
        required=False,
        label="Lendable",
        help_text="Blank: all of the guarantee may be lent while idle.",
        widget=NUMBER,
    )
    weight = forms.CharField(required=False, label="Fair-share weight", widget=NUMBER)

    def __init__(self, *args: Any, tenant: Tenant, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _choose(self, "gpu_class", _choices_of_classes("Choose a class", tenant))

    @staticmethod
    def initial_of(quota: Quota | None, gpu_class: str) -> dict[str, Any]:
        """What the form opens with: the quota's current values when it is being edited, so that changing one
        field leaves the others as they are (a blank guarantee would be 0)."""
        if quota is None:
            return {"gpu_class": gpu_class}
        lendable = "" if quota.lendable is None else quota.lendable
        return {
            "gpu_class": gpu_class,
            "guaranteed": quota.guaranteed,
            "burst": quota.burst,
            "lendable": lendable,
            "weight": quota.weight,
        }


class MemberForm(forms.Form):
    username = forms.CharField(
        required=False,
        label="Username or e-mail",
        help_text="A username, or an e-mail address: someone without an account yet is invited and gets the "
        "role at their first sign-in.",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    role = forms.ChoiceField(label="Role", choices=Membership.Role.choices, initial=Membership.Role.MEMBER)


class RoleForm(forms.Form):
    role = forms.ChoiceField(label="Role", choices=Membership.Role.choices)


class TokenForm(forms.Form):
    name = forms.CharField(required=False, label="Name", help_text="Where it is used: “laptop”, “terraform”.")
    scope = forms.ChoiceField(
        label="Scope",
        choices=[(value, label) for value, label in ApiToken.Scope.choices if value in SCOPES],  # not scim
        initial=ApiToken.Scope.READ,
        help_text="read only reads; write also changes; admin also manages members and tokens.",
    )
    expires_at = forms.DateField(
        required=False,
        label="Expires",
        help_text="Blank: never (revoke it when done). It stops working at 00:00 UTC that day.",
        widget=forms.DateInput(attrs={"type": "date"}),
        error_messages={"invalid": "write the date as YYYY-MM-DD"},
    )


class AuditFilterForm(forms.Form):
    actor = forms.CharField(required=False, label="Who")
    tenant = forms.CharField(required=False, label="Tenant")
    action = forms.CharField(required=False, label="Action", help_text="e.g. quota.set")
    since = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))


class WhatIfForm(forms.Form):
    """A what-if question: a guarantee (`ask=quota`) or a gang (`ask=gang`), for a tenant or a tier."""

    ask = forms.ChoiceField(
        label="Question", choices=[("quota", "Would this quota fit?"), ("gang", "Would this gang fit?")]
    )
    tenant = forms.CharField(
        required=False, label="Tenant", help_text="Blank: a new tenant of the trust tier given."
    )
    trust_tier = forms.ChoiceField(
        required=False, label="Trust tier of a new tenant", choices=[("", "—"), *Tenant.TrustTier.choices]
    )
    gpu_class = forms.ChoiceField(required=False, label="GPU class")
    guaranteed = forms.CharField(required=False, label="Guaranteed (quota)", widget=NUMBER)
    pods = forms.CharField(required=False, label="Pods (gang)", widget=NUMBER)
    gpus_per_pod = forms.CharField(required=False, label="GPUs per pod (gang)", widget=NUMBER)
    level = forms.ChoiceField(
        required=False,
        label="Keep the gang within one",
        choices=[(v, v) for v in ("rack", "node", "nvlink", "block", "zone")],
    )
    required = forms.BooleanField(required=False, label="Required (not just preferred)")
    host_cluster = forms.ChoiceField(label="Host cluster", required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _choose(self, "gpu_class", _choices_of_classes("Choose a class"))
        _choose(self, "host_cluster", _choices_of_host_clusters())


class UserForm(forms.Form):
    username = forms.CharField(
        required=False, label="Username", widget=forms.TextInput({"autocomplete": "off"})
    )
    email = forms.CharField(
        required=False, label="E-mail", help_text="Invitations to this address become theirs."
    )
    password = forms.CharField(
        required=False,
        label="Password",
        help_text="Blank: one is generated and shown once, for you to pass on.",
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )


class RateCardForm(forms.Form):
    effective_from = forms.DateField(
        label="In force from",
        help_text="00:00 UTC that day; a card is never edited, a new one replaces it.",
        widget=forms.DateInput(attrs={"type": "date"}),
        error_messages={"invalid": "write the date as YYYY-MM-DD", "required": "give the first day"},
    )
    currency = forms.CharField(required=False, label="Currency", initial="USD")
    prices = forms.CharField(
        required=False,
        label="Prices per GPU-hour",
        help_text=f"One class a line: h200-141gb = 3.10. Each is {money.PRICE.rule}.",
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
    )
    tier_multipliers = forms.CharField(
        required=False,
        label="Trust-tier multipliers",
        help_text=f"Optional, one a line: isolated = 1.25. Each is {money.MULTIPLIER.rule}.",
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false"}),
    )
    note = forms.CharField(required=False, label="Note")


class RetireRateCardForm(forms.Form):
    effective_until = forms.DateField(
        required=False,
        label="No longer in force from",
        help_text="00:00 UTC that day; empty: now. The card before it applies again.",
        widget=forms.DateInput(attrs={"type": "date", "aria-label": "No longer in force from"}),
        error_messages={"invalid": "write the date as YYYY-MM-DD"},
    )


class BudgetForm(forms.Form):
    monthly_amount = money.BUDGET.form_field(label="Monthly amount")
    currency = forms.CharField(
        required=False, label="Currency", initial="USD", help_text="Three letters, e.g. USD."
    )
    email = forms.CharField(
        required=False,
        label="Alert e-mail",
        help_text="Blank: no e-mail.",
        widget=forms.EmailInput(attrs={"autocomplete": "email"}),
    )
    enforce = forms.BooleanField(required=False, label="Hold the queues at 100 % (suspends the tenant)")
    webhook_url = forms.CharField(
        required=False,
        label="Alert webhook",
        help_text="An https URL to a public address; it is stored encrypted and never shown again.",
        widget=forms.URLInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    remove_webhook = forms.BooleanField(required=False, label="Remove the webhook")

    def __init__(self, *args: Any, webhook_origin: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if webhook_origin:  # set: its URL may hold a secret, so it is never sent back to the browser
            field = self.fields["webhook_url"]
            field.help_text = f"Set ({webhook_origin}) — leave empty to keep, or type a new URL."
            field.widget.attrs["placeholder"] = "set — leave empty to keep"
        else:
            del self.fields["remove_webhook"]

    def webhook(self) -> str | None:
        """What `set_budget` takes: None keeps the stored webhook, "" removes it, a URL replaces it."""
        if self.cleaned_data.get("remove_webhook"):
            return ""
        return self.cleaned_data["webhook_url"].strip() or None


class HostClusterUpdateForm(forms.Form):
    """Changing a host cluster (clusters/lifecycle.py): what is left empty is kept."""

    kubeconfig = forms.CharField(
        required=False,
        strip=False,
        label="New kubeconfig",
        help_text="Paste a rotated kubeconfig: it is checked against the cluster first, stored encrypted.",
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false", "autocomplete": "off"}),
    )
    scheduler = forms.ChoiceField(
        required=False,
        label="Scheduler",
        choices=[("", "keep"), ("kueue", "kueue"), ("kai", "kai")],
        help_text="Changes only with no tenants on it.",
    )
    watch_tenants = forms.CharField(
        required=False,
        max_length=63,
        label="Watched namespace",
        help_text="Tenant custom resources; empty: none.",
    )


class CordonForm(forms.Form):
    reason = forms.CharField(required=False, max_length=300, label="Reason")


class RetireForm(forms.Form):
    retire_reason = forms.CharField(
        required=False, max_length=300, label="Reason (empty: the cordon reason it has)"
    )


class DrainForm(forms.Form):
    target = forms.ChoiceField(required=False, label="Move tenants to")
    recreate = forms.BooleanField(
        required=False,
        label="Also re-make ready and suspended tenant clusters (they start empty on the target)",
    )
    preview = forms.BooleanField(required=False)

    def __init__(self, *args: Any, exclude: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = [c.name for c in serving_host_clusters() if c.name != exclude]
        target = self.fields["target"]
        assert isinstance(target, forms.ChoiceField)
        target.choices = [("", "any that admits them"), *((n, n) for n in names)]
