"""Metering state, the usage ledger, scrape records, rate cards, invoices and budgets.

Quantities in the ledger are integer micro-units (1 GPU-second = 1,000,000), so sums are exact and no float
ever reaches money. Money is `Decimal`, with its currency beside it.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from urllib.parse import urlsplit

from django.db import models
from django.utils import timezone

from billing import money
from fleet.models import HostCluster
from gpucloud import crypto
from gpucloud.ids import PublicIdField
from health.models import HealthEvent
from tenants.models import Tenant

MICRO = 1_000_000


class MeterState(models.Model):
    """The integrator's per-device state for one node: the last sample of each of its devices.

    Saved in the same transaction as the ledger rows it produced, so a crash never integrates twice.
    """

    host_cluster = models.ForeignKey(HostCluster, on_delete=models.CASCADE, related_name="+")
    node = models.CharField(max_length=253)
    state = models.JSONField(default=dict)
    # The node's DCGM health counters at its last scrape ({uuid: {field: value}}), so a round compares what
    # rose since (NVLink errors, throttle time): `health.services.observe` reads the difference.
    health = models.JSONField(default=dict, blank=True)
    # Framebuffer memory used at its last scrape, MiB, by device ("uuid", or "uuid/GPU_I_ID" for a MIG
    # instance): what a pod holds in memory on the tenant's standing page (`billing.standing`).
    memory = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["host_cluster", "node"], name="meter_state_unique_node")
        ]

    def __str__(self) -> str:
        return f"{self.node}@{self.host_cluster_id}"


class ScrapeRecord(models.Model):
    """One collection of one node at one time: what came in and what was wrong with it.

    Unique per (host cluster, node, time): ingesting the same scrape twice adds nothing.
    """

    class Status(models.TextChoices):
        OK = "ok"
        PARTIAL = "partial"
        FAILED = "failed"

    class Source(models.TextChoices):
        EXPORTER = "exporter"
        PROMETHEUS = "prometheus"
        FILE = "file"

    host_cluster = models.ForeignKey(HostCluster, on_delete=models.CASCADE, related_name="+")
    node = models.CharField(max_length=253)
    at = models.DateTimeField()
    source = models.CharField(max_length=12, choices=Source.choices)
    status = models.CharField(max_length=10, choices=Status.choices)
    reason = models.TextField(blank=True)
    devices = models.PositiveIntegerField(default=0)
    samples = models.PositiveIntegerField(default=0)
    garbled = models.PositiveIntegerField(default=0)
    late = models.PositiveIntegerField(default=0)
    duplicates = models.PositiveIntegerField(default=0)
    gaps = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-at", "node"]
        constraints = [
            models.UniqueConstraint(fields=["host_cluster", "node", "at"], name="scrape_unique_node_time")
        ]
        indexes = [models.Index(fields=["host_cluster", "-at"], name="scrape_cluster_at")]

    def __str__(self) -> str:
        return f"{self.node}@{self.at:%Y-%m-%dT%H:%M:%S} {self.status}"


class HeldRound(models.Model):
    """A collection round of a Kubernetes host cluster taken but not yet ingested: it waits until the live
    view holds every pod event up to its time, so that its pods' edges are exact, and at most
    `METER_VIEW_WAIT` (docs/billing.md, "Waiting for the live view"). Deleted by the transaction that ingests
    it.

    A round read from dcgm-exporter endpoints keeps their bodies (an exporter only ever shows the present);
    one read from Prometheus keeps none, as Prometheus answers for any past instant.
    """

    host_cluster = models.ForeignKey(HostCluster, on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField()
    source = models.CharField(max_length=12, choices=ScrapeRecord.Source.choices)
    bodies = models.JSONField(
        null=True,
        blank=True,
        help_text='node -> exposition text, or {"failed": reason}; null: Prometheus is queried at `at`',
    )
    hami = models.JSONField(
        null=True,
        blank=True,
        help_text='HAMi scheduler metrics read with the round: text, or {"failed": reason}',
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["host_cluster", "at"]
        constraints = [models.UniqueConstraint(fields=["host_cluster", "at"], name="held_round_unique_time")]

    def __str__(self) -> str:
        return f"{self.host_cluster_id} @ {self.at:%Y-%m-%d %H:%M:%S}"


class UsageEntry(models.Model):
    """One append-only ledger row: what one pod (or nobody) used of one device in one hour.

    `tenant` empty is the platform's idle or system time. Quantities are micro-units.
    """

    scrape = models.ForeignKey(ScrapeRecord, on_delete=models.PROTECT, related_name="+")
    host_cluster = models.ForeignKey(HostCluster, on_delete=models.PROTECT, related_name="+")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    gpu_class = models.CharField(max_length=80, help_text="catalog class name, or unknown:<modelName>")
    node = models.CharField(max_length=253)
    device = models.CharField(max_length=120, help_text="GPU UUID, or UUID/GPU_I_ID for a MIG instance")
    namespace = models.CharField(max_length=63, blank=True)
    pod = models.CharField(max_length=253, blank=True)
    hour = models.DateTimeField()
    gpu_us = models.BigIntegerField(help_text="GPU-seconds × 10⁶")
    util_gpu_us = models.BigIntegerField(help_text="utilisation-weighted GPU-seconds × 10⁶")
    millijoules = models.BigIntegerField()
    recorded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            # Covering: one tenant's usage over a month is read from the index alone.
            models.Index(
                fields=["tenant", "hour"],
                include=["gpu_class", "gpu_us", "util_gpu_us", "millijoules"],
                name="usage_tenant_hour",
            ),
            models.Index(fields=["hour"], name="usage_hour"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id or 'platform'} {self.gpu_class} {self.hour:%Y-%m-%dT%H}"


class UsageHour(models.Model):
    """The ledger summed per (node, device, pod, GPU class, hour): what usage queries and budgets read.

    Maintained in the ingest transaction from the ledger rows it appends (added, never overwritten), so it
    counts each scrape exactly once like the ledger; `UsageEntry` stays the append-only record invoices use.
    """

    host_cluster = models.ForeignKey(HostCluster, on_delete=models.PROTECT, related_name="+")
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    gpu_class = models.CharField(max_length=80)
    node = models.CharField(max_length=253)
    device = models.CharField(max_length=120)
    namespace = models.CharField(max_length=63, blank=True)
    pod = models.CharField(max_length=253, blank=True)
    hour = models.DateTimeField()
    gpu_us = models.BigIntegerField()
    util_gpu_us = models.BigIntegerField()
    millijoules = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["host_cluster", "node", "device", "namespace", "pod", "gpu_class", "hour"],
                name="usage_hour_unique_cell",
            )
        ]
        indexes = [
            models.Index(
                fields=["tenant", "hour"],
                include=["gpu_class", "gpu_us", "util_gpu_us", "millijoules"],
                name="usage_hour_tenant_hour",
            ),
            models.Index(fields=["hour"], name="usage_hour_hour"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id or 'platform'} {self.gpu_class} {self.hour:%Y-%m-%dT%H}"


class UnknownNode(models.Model):
    """A node that sent samples but is not in the fleet: its samples are billed, the node is reported."""

    host_cluster = models.ForeignKey(HostCluster, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=253)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    scrapes = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["host_cluster", "name"]
        constraints = [
            models.UniqueConstraint(fields=["host_cluster", "name"], name="unknown_node_unique_name")
        ]

    def __str__(self) -> str:
        return self.name


class CollectionSource(models.Model):
    """How usage of a host cluster is collected, and how the last collection went.

    Simulated host clusters are scraped through their loopback exporters unless a source says otherwise.
    """

    class Kind(models.TextChoices):
        EXPORTER = "exporter"
        PROMETHEUS = "prometheus"

    host_cluster = models.OneToOneField(HostCluster, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    url = models.CharField(
        max_length=300,
        blank=True,
        help_text="Prometheus base URL, or an exporter URL template with {node} (http://{node}:9400/metrics)",
    )
    hami_url = models.CharField(
        max_length=300,
        blank=True,
        help_text="Where the cluster runs HAMi: its scheduler's metrics "
        "(http://hami-scheduler.kube-system:31993/metrics), read each round to bill HAMi fractions",
    )
    last_collected_at = models.DateTimeField(null=True, blank=True)
    last_status = models.CharField(max_length=10, blank=True)
    last_message = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"{self.kind} for {self.host_cluster_id}"


def _zero() -> Decimal:
    return Decimal(0)


class RateCard(models.Model):
    """Prices per GPU-hour per GPU class, in force from `effective_from` until the next version.

    Classes without a price of their own: a MIG slice costs its model's whole-GPU price × its fraction of
    the GPU; a share costs the whole-GPU price per GPU-hour it used (its usage is already a fraction).
    """

    public_id = PublicIdField(prefix="rc")
    version = models.PositiveIntegerField(unique=True)
    # A manifest's `metadata.name`: every version written from one RateCard manifest carries it (empty for
    # cards made through the API, which manifests call `v<version>`).
    name = models.CharField(max_length=63, blank=True, db_index=True)
    currency = models.CharField(max_length=3, default="USD")
    effective_from = models.DateTimeField()
    # Retired: not in force from this moment on (the card that would be in force without it applies again).
    effective_until = models.DateTimeField(null=True, blank=True)
    # Decimal strings, each a `billing.money.PRICE` / `MULTIPLIER` (the service parses them on the way in).
    prices = models.JSONField(default=dict, help_text="{gpu class: decimal string per GPU-hour}")
    tier_multipliers = models.JSONField(
        default=dict, help_text="{isolated|standard|trusted: decimal string}; missing = 1"
    )
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-effective_from", "-version"]

    def __str__(self) -> str:
        return f"rate card v{self.version}"

    def in_force_at(self, moment: datetime) -> bool:
        """Whether the card applies at `moment`, leaving later versions aside."""
        return self.effective_from <= moment and (
            self.effective_until is None or moment < self.effective_until
        )


class Invoice(models.Model):
    """A tenant's charges for one calendar month: a draft until issued, never changed after.

    `ledger_watermark` is the last ledger row the issued invoice saw: rows written later for an issued
    month are late usage and become adjustment lines on the tenant's next invoice.
    """

    class State(models.TextChoices):
        DRAFT = "draft"
        ISSUED = "issued"

    public_id = PublicIdField(prefix="inv")
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.DRAFT)
    currency = models.CharField(max_length=3, default="USD")
    trust_tier = models.CharField(max_length=10)
    total = models.DecimalField(max_digits=18, decimal_places=2, default=_zero)
    ledger_watermark = models.BigIntegerField(default=0)
    issued_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-period_start", "tenant__slug"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "period_start"], name="invoice_unique_period")
        ]

    def __str__(self) -> str:
        return f"{self.public_id} {self.tenant_id} {self.period_start:%Y-%m}"


class InvoiceLine(models.Model):
    """One charge: a GPU class at one price over part of the month, or an adjustment for late usage."""

    class Kind(models.TextChoices):
        USAGE = "usage"
        ADJUSTMENT = "adjustment"
        CREDIT = "credit"

    invoice = models.ForeignKey(Invoice, on_delete=models.CASCADE, related_name="lines")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    gpu_class = models.CharField(max_length=80)
    description = models.CharField(max_length=300)
    charge_start = models.DateTimeField()
    charge_end = models.DateTimeField()
    gpu_hours = models.DecimalField(max_digits=20, decimal_places=6)
    list_unit_price = models.DecimalField(max_digits=14, decimal_places=6)
    unit_price = models.DecimalField(max_digits=14, decimal_places=6, help_text="after the tier multiplier")
    list_amount = models.DecimalField(max_digits=18, decimal_places=2)
    amount = models.DecimalField(max_digits=18, decimal_places=2)
    currency = models.CharField(max_length=3)
    rate_card_version = models.PositiveIntegerField(null=True)

    class Meta:
        ordering = ["invoice", "kind", "gpu_class", "charge_start"]

    def __str__(self) -> str:
        return f"{self.gpu_class} {self.amount} {self.currency}"


class Budget(models.Model):
    """A tenant's monthly spending budget; alerts at 50, 80 and 100 %, enforcement optional."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="budget")
    monthly_amount = money.BUDGET.model_field()
    currency = models.CharField(max_length=3, default="USD")
    # Encrypted (gpucloud.crypto): a webhook URL often carries a secret. Empty: no webhook.
    webhook_url_ciphertext = models.TextField(blank=True, default="")
    email = models.EmailField(blank=True)
    enforce = models.BooleanField(default=False, help_text="hold the tenant's queues at 100 %")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.tenant_id}: {self.monthly_amount} {self.currency}"

    @property
    def webhook_url(self) -> str:
        return crypto.decrypt(self.webhook_url_ciphertext) if self.webhook_url_ciphertext else ""

    @property
    def webhook_origin(self) -> str:
        """The webhook's scheme and host, safe to show: the rest of the URL may be a secret."""
        parts = urlsplit(self.webhook_url)
        return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}/…" if parts.netloc else ""


class BudgetAlert(models.Model):
    """A threshold of a budget crossed in one month; one row per threshold per month, so alerts fire once."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="alerts")
    period_start = models.DateTimeField()
    threshold = models.PositiveSmallIntegerField()
    spent = models.DecimalField(max_digits=18, decimal_places=2)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-period_start", "threshold"]
        constraints = [
            models.UniqueConstraint(
                fields=["budget", "period_start", "threshold"], name="budget_alert_unique_threshold"
            )
        ]

    def __str__(self) -> str:
        return f"{self.budget_id} {self.threshold}% {self.period_start:%Y-%m}"


class HealthCredit(models.Model):
    """Time a tenant lost to a fault that quarantined a GPU it held: from the last clean sample of its device
    to the end of its allocation, capped by `HEALTH_CREDIT_MAX_HOURS`. One row per (event, device, pod),
    however often the round that found it is replayed or retried; it goes on the tenant's next invoice as a
    credit line and is tied to the issued invoice that carried it (`docs/health.md`)."""

    public_id = PublicIdField(prefix="cr")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    # SET_NULL: a fleet reload may delete the node and its events; the credit and its invoice line stay.
    event = models.ForeignKey(HealthEvent, null=True, on_delete=models.SET_NULL, related_name="+")
    host_cluster = models.ForeignKey(HostCluster, on_delete=models.CASCADE, related_name="+")
    node = models.CharField(max_length=253)
    gpu_uuid = models.CharField(max_length=80)
    device = models.CharField(max_length=120, help_text="GPU UUID, or UUID/GPU_I_ID for a MIG instance")
    namespace = models.CharField(max_length=63)
    pod = models.CharField(max_length=253)
    gpu_class = models.CharField(max_length=80)
    lost_from = models.DateTimeField(help_text="the device's last clean sample before the fault")
    lost_until = models.DateTimeField(help_text="the allocation's end, capped")
    gpu_us = models.BigIntegerField(help_text="GPU-seconds lost × 10⁶ (a MIG instance or share: its part)")
    invoice = models.ForeignKey(
        Invoice,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="issued, carrying it",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["lost_from", "id"]
        constraints = [
            models.UniqueConstraint(fields=["event", "device", "namespace", "pod"], name="health_credit_once")
        ]

    def __str__(self) -> str:
        return f"{self.public_id} {self.device} {self.namespace}/{self.pod}"
