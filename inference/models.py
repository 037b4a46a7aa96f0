"""Inference endpoints: a model served for a tenant by replicas of an engine (vLLM) on its GPUs.

An endpoint is desired state, written by `inference.services` only: what to serve (model, source, served
name, revision), with what (engine, its arguments, GPU class and units per replica), how many replicas
(`min_replicas` guaranteed, up to `max_replicas` borrowed) and who may call it (the tenant, or every tenant
at a price). The reconciler renders it onto the tenant's host cluster (`clusters/render/inference.py`) and
writes back what it observed (`replicas_ready`, `model_loaded`, `status_message`). docs/inference.md.
"""

from __future__ import annotations

from django.db import models

from fleet.models import GpuClass
from gpucloud.ids import PublicIdField
from tenants.models import Tenant


class InferenceEndpoint(models.Model):
    """A model served for one tenant (`docs/inference.md`)."""

    class Engine(models.TextChoices):
        VLLM = "vllm"

    class Visibility(models.TextChoices):
        TENANT = "tenant"  # the tenant's own callers only
        PUBLISHED = "published"  # every tenant of the platform, at `price_per_million_tokens`

    class Desired(models.TextChoices):
        RUNNING = "running"
        STOPPED = "stopped"  # kept, with no replica: its GPUs return to the pool

    public_id = PublicIdField(prefix="ie")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="inference_endpoints")
    name = models.CharField(max_length=40, help_text="a DNS label, unique in the tenant")
    model_name = models.CharField(max_length=200, help_text="what is served, e.g. meta-llama/Llama-3.1-8B")
    source_uri = models.CharField(
        max_length=1000, help_text="where the weights are: hf://, s3://, gs://, pvc://"
    )
    served_model_name = models.CharField(max_length=200, help_text="the `model` callers name in requests")
    revision = models.CharField(max_length=100, blank=True, help_text="a branch, tag or commit of the source")
    engine = models.CharField(max_length=20, choices=Engine.choices, default=Engine.VLLM)
    engine_args = models.JSONField(default=list, blank=True, help_text="extra arguments to the engine")
    gpu_class = models.ForeignKey(GpuClass, on_delete=models.PROTECT, related_name="+")
    gpus_per_replica = models.PositiveIntegerField(default=1, help_text="units of the GPU class per replica")
    min_replicas = models.PositiveIntegerField(default=1, help_text="guaranteed; 0 = scale to zero")
    max_replicas = models.PositiveIntegerField(default=1, help_text="beyond min, borrowed (burst)")
    context_length = models.PositiveIntegerField(
        null=True, blank=True, help_text="the engine's --max-model-len; empty = the model's own"
    )
    visibility = models.CharField(max_length=10, choices=Visibility.choices, default=Visibility.TENANT)
    price_per_million_tokens = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True, help_text="published endpoints only"
    )
    desired = models.CharField(max_length=10, choices=Desired.choices, default=Desired.RUNNING)
    # What the reconciler observed on the host cluster (written only when it changed).
    replicas_ready = models.PositiveIntegerField(default=0)
    model_loaded = models.BooleanField(default=False)
    status_message = models.CharField(max_length=500, blank=True)
    observed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant", "name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="inference_endpoint_unique_name"),
            models.CheckConstraint(
                condition=models.Q(min_replicas__lte=models.F("max_replicas"))
                & models.Q(max_replicas__gte=1),
                name="inference_endpoint_replicas_in_order",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.name}"

    @property
    def units_at_min(self) -> int:
        """Units of its GPU class the endpoint holds at its minimum: what must be guaranteed."""
        return self.min_replicas * self.gpus_per_replica

    @property
    def units_at_max(self) -> int:
        """Units it may hold at its maximum: what may be borrowed up to the quota's burst."""
        return self.max_replicas * self.gpus_per_replica


class InferenceKey(models.Model):
    """A virtual key calling the gateway for one tenant (`docs/inference.md`, "Keys").

    `gpk_` + an 8-character lookup prefix + a 32-character secret; only the prefix and an HMAC of the whole
    key are stored (as API tokens, `tenants/tokens.py`), and the key is shown once, on creation. Limits are
    LiteLLM's: `rpm` requests and `tpm` tokens per minute, and per calendar month (UTC) a token budget and a
    spend budget (at the price of published endpoints). Empty = no limit."""

    public_id = PublicIdField(prefix="ik")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="inference_keys")
    name = models.CharField(max_length=100, help_text="where the key is used")
    prefix = models.CharField(max_length=8, unique=True)
    digest = models.CharField(max_length=64)
    endpoints = models.ManyToManyField(
        InferenceEndpoint, blank=True, related_name="+", help_text="the endpoints it may call; none = all"
    )
    rpm = models.PositiveIntegerField(null=True, blank=True, help_text="requests per minute")
    tpm = models.PositiveIntegerField(null=True, blank=True, help_text="tokens per minute")
    monthly_tokens = models.PositiveBigIntegerField(null=True, blank=True, help_text="tokens per month")
    monthly_budget = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True, help_text="money per month"
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["tenant", "created_at"]

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.name} (gpk_{self.prefix}…)"


class InferenceUsage(models.Model):
    """One request through the gateway, as metered: written once per request (`request_id`), even when the
    client went away mid-stream. Billing rates these rows later (not yet: docs/inference.md, "Not yet")."""

    request_id = models.CharField(max_length=40, unique=True)
    key = models.ForeignKey(InferenceKey, on_delete=models.SET_NULL, null=True, related_name="+")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", help_text="the caller")
    endpoint = models.ForeignKey(InferenceEndpoint, on_delete=models.SET_NULL, null=True, related_name="+")
    model = models.CharField(max_length=200, help_text="the served name the request asked for")
    route = models.CharField(max_length=40, help_text="chat/completions, completions or embeddings")
    stream = models.BooleanField(default=False)
    status = models.PositiveSmallIntegerField(help_text="the HTTP status the caller got")
    prompt_tokens = models.PositiveIntegerField(default=0)
    cached_prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(
        max_digits=16, decimal_places=9, default=0, help_text="at a published endpoint's price; else 0"
    )
    latency_ms = models.PositiveIntegerField(default=0, help_text="request in to last byte out")
    first_byte_ms = models.PositiveIntegerField(null=True, blank=True)
    completed = models.BooleanField(default=True, help_text="false: the client went away first")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["key", "created_at"], name="inference_usage_key_time")]

    def __str__(self) -> str:
        return f"{self.request_id} {self.model} {self.status}"

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens
