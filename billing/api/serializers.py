from __future__ import annotations

from decimal import Decimal
from typing import Any

from rest_framework import serializers

from billing import money
from billing.models import (
    MICRO,
    Budget,
    BudgetAlert,
    CollectionSource,
    Invoice,
    InvoiceLine,
    RateCard,
    ScrapeRecord,
)
from gpucloud.api.serializers import ModelSerializer, model_field


def _micro(value: int | None, per: int = MICRO) -> str:
    return str((Decimal(value or 0) / per).quantize(Decimal("0.000001")))


class UsageSerializer(serializers.Serializer[dict[str, Any]]):
    """One sum of the ledger. Quantities are decimal strings: GPU-seconds, utilised GPU-seconds, joules."""

    tenant = serializers.CharField(
        source="tenant__slug", allow_null=True, help_text="null = platform idle/system"
    )
    gpu_class = serializers.CharField()
    period_start = serializers.DateTimeField(source="period", required=False, allow_null=True)
    gpu_seconds = serializers.SerializerMethodField()
    util_gpu_seconds = serializers.SerializerMethodField()
    joules = serializers.SerializerMethodField()

    def get_gpu_seconds(self, row: dict[str, Any]) -> str:
        return _micro(row["gpu_us"])

    def get_util_gpu_seconds(self, row: dict[str, Any]) -> str:
        return _micro(row["util_gpu_us"])

    def get_joules(self, row: dict[str, Any]) -> str:
        return _micro(row["millijoules"], 1000)


class RateCardSerializer(ModelSerializer[RateCard]):
    id = serializers.CharField(source="public_id", read_only=True)
    prices = serializers.DictField(
        child=money.PRICE.serializer_field(), help_text=f"GPU class → {money.PRICE.what}: {money.PRICE.rule}"
    )
    tier_multipliers = serializers.DictField(
        child=money.MULTIPLIER.serializer_field(),
        required=False,
        help_text=f"trust tier → {money.MULTIPLIER.what} (missing = 1): {money.MULTIPLIER.rule}",
    )
    effective_until = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text="set when the card was retired: it no longer applies from then on; null while it is not",
    )

    class Meta:
        model = RateCard
        fields = [
            "id",
            "version",
            "currency",
            "effective_from",
            "effective_until",
            "prices",
            "tier_multipliers",
            "note",
            "created_at",
        ]
        read_only_fields = ["version", "created_at"]


class RateCardRetireSerializer(serializers.Serializer[None]):
    effective_until = serializers.DateTimeField(
        required=False, help_text="from when the card no longer applies; default now"
    )


class InvoiceLineSerializer(ModelSerializer[InvoiceLine]):
    class Meta:
        model = InvoiceLine
        fields = [
            "kind",
            "gpu_class",
            "description",
            "charge_start",
            "charge_end",
            "gpu_hours",
            "list_unit_price",
            "unit_price",
            "list_amount",
            "amount",
            "currency",
            "rate_card_version",
        ]


class InvoiceSerializer(ModelSerializer[Invoice]):
    id = serializers.CharField(source="public_id", read_only=True)
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    lines = InvoiceLineSerializer(many=True, read_only=True)

    class Meta:
        model = Invoice
        fields = [
            "id",
            "tenant",
            "period_start",
            "period_end",
            "state",
            "currency",
            "trust_tier",
            "total",
            "issued_at",
            "lines",
        ]


class InvoiceDraftSerializer(serializers.Serializer[None]):
    tenant = serializers.SlugField()
    month = serializers.RegexField(r"^\d{4}-(0[1-9]|1[0-2])$", help_text="YYYY-MM")


class BudgetAlertSerializer(ModelSerializer[BudgetAlert]):
    class Meta:
        model = BudgetAlert
        fields = ["period_start", "threshold", "spent", "created_at"]


class BudgetSerializer(ModelSerializer[Budget]):
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    webhook_url = serializers.CharField(
        source="webhook_origin", read_only=True, help_text="scheme and host only; the rest may be a secret"
    )
    alerts = BudgetAlertSerializer(many=True, read_only=True)
    monthly_amount = money.BUDGET.serializer_field(read_only=True)

    class Meta:
        model = Budget
        fields = [
            "tenant",
            "monthly_amount",
            "currency",
            "webhook_url",
            "email",
            "enforce",
            "updated_at",
            "alerts",
        ]


class BudgetWriteSerializer(serializers.Serializer[None]):
    tenant = serializers.SlugField()
    monthly_amount = money.BUDGET.serializer_field()
    currency = model_field(Budget, "currency", default="USD")
    # Stored encrypted in a text column; the bound keeps a URL a URL.
    webhook_url = serializers.URLField(required=False, allow_blank=True, max_length=2000)
    email = model_field(Budget, "email", required=False)
    enforce = serializers.BooleanField(default=False)


class CollectionSourceSerializer(ModelSerializer[CollectionSource]):
    host_cluster = serializers.CharField(source="host_cluster.name", read_only=True)

    class Meta:
        model = CollectionSource
        fields = [
            "host_cluster",
            "kind",
            "url",
            "hami_url",
            "last_collected_at",
            "last_status",
            "last_message",
        ]


class ScrapeRecordSerializer(ModelSerializer[ScrapeRecord]):
    host_cluster = serializers.CharField(source="host_cluster.name", read_only=True)

    class Meta:
        model = ScrapeRecord
        fields = [
            "host_cluster",
            "node",
            "at",
            "source",
            "status",
            "reason",
            "devices",
            "samples",
            "garbled",
            "late",
            "duplicates",
            "gaps",
        ]


class _CostFields(serializers.Serializer[Any]):
    """Drops the money fields for a caller whose role may not see cost (`context["with_cost"]` false)."""

    money: tuple[str, ...] = ()

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data = super().to_representation(instance)
        if not self.context.get("with_cost"):
            for name in self.money:
                data.pop(name, None)
        return data


class ClassStandingSerializer(_CostFields):
    """One GPU class, in units of the class (whole GPUs, MIG instances or shares)."""

    money = ("price_per_hour", "cost_per_hour")
    gpu_class = serializers.CharField()
    guaranteed = serializers.IntegerField()
    burst = serializers.IntegerField(help_text="units above the guarantee it may borrow")
    lendable = serializers.IntegerField(allow_null=True, help_text="null = all of the guarantee")
    in_use = serializers.IntegerField(help_text="held by the tenant's live pods now")
    borrowed = serializers.IntegerField(help_text="in use beyond the guarantee, up to the burst")
    lent = serializers.IntegerField(help_text="of its idle guarantee, in use by others of its cohort")
    price_per_hour = serializers.DecimalField(
        max_digits=14, decimal_places=6, allow_null=True, required=False,
        help_text="per unit, tier multiplier applied; only for roles that may see cost; null = unpriced",
    )  # fmt: skip
    cost_per_hour = serializers.DecimalField(
        max_digits=14, decimal_places=2, allow_null=True, required=False,
        help_text="of what it uses now; only for roles that may see cost",
    )  # fmt: skip


class WorkloadUseSerializer(_CostFields):
    """One running pod and how busy its GPUs are (DCGM, as metering attributed it to the pod)."""

    money = ("cost",)
    namespace = serializers.CharField()
    name = serializers.CharField()
    gpu_class = serializers.CharField()
    units = serializers.IntegerField()
    node = serializers.CharField()
    started_at = serializers.DateTimeField()
    utilisation = serializers.FloatField(
        allow_null=True, help_text="percent at the latest sample; null before metering sampled it"
    )
    sampled_at = serializers.DateTimeField(allow_null=True)
    memory_mib = serializers.FloatField(
        allow_null=True, help_text="GPU memory used on its devices at that sample, MiB (a share: its GPU's)"
    )
    mean_utilisation = serializers.FloatField(
        allow_null=True, help_text="percent over the hours metered since it started"
    )
    gpu_hours = serializers.FloatField(help_text="metered since it started")
    cost = serializers.DecimalField(
        max_digits=14, decimal_places=2, allow_null=True, required=False,
        help_text="of its metered GPU-hours; only for roles that may see cost",
    )  # fmt: skip


class StandingSerializer(_CostFields):
    """Where a tenant stands now: per GPU class, and its running pods idle first."""

    money = ("currency", "spent_this_month")
    tenant = serializers.CharField(source="tenant.slug", help_text="the tenant's slug")
    at = serializers.DateTimeField()
    classes = ClassStandingSerializer(many=True)
    workloads = WorkloadUseSerializer(many=True)
    currency = serializers.CharField(allow_null=True, required=False)
    spent_this_month = serializers.DecimalField(
        max_digits=14, decimal_places=2, allow_null=True, required=False,
        help_text="at the rate cards in force; only for roles that may see cost",
    )  # fmt: skip


class FeasibilitySerializer(serializers.Serializer[Any]):
    gpu_class = serializers.CharField(help_text="a GPU class name (GET /api/v1/gpu-classes/)")
    count = serializers.IntegerField(help_text="units of the class: GPUs, MIG slices or shares")
    hours = serializers.FloatField(help_text="how long it would run")


class QuotaUseSerializer(serializers.Serializer[Any]):
    guaranteed = serializers.IntegerField()
    burst = serializers.IntegerField()
    in_use = serializers.IntegerField()
    ahead = serializers.IntegerField(help_text="units of the class queued before it")
    from_guarantee = serializers.IntegerField(help_text="of the units asked, those within the guarantee")
    borrowed = serializers.IntegerField(help_text="those borrowed from the cohort's idle GPUs (within burst)")


class FeasibilityAnswerSerializer(serializers.Serializer[Any]):
    gpu_class = serializers.CharField(source="gpu_class.name")
    count = serializers.IntegerField()
    hours = serializers.FloatField()
    host_cluster = serializers.CharField()
    fits_now = serializers.BooleanField()
    estimated_start = serializers.DateTimeField(allow_null=True, help_text="null: not within a week")
    reason = serializers.CharField()
    nodes = serializers.ListField(child=serializers.CharField(), help_text="where it would start")
    quota = QuotaUseSerializer()
    price = serializers.DictField(
        allow_null=True,
        help_text="on the tenant's rate card: per_unit_hour, total, currency, rate_card_version; null for"
        " roles that may not see cost, or when no card prices the class",
    )
