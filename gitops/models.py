"""Which source owns each object applied from manifests, and the git repositories synced into gpucloud."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from gpucloud.ids import PublicIdField


class ManagedObject(models.Model):
    """An object applied from manifests, the source that owns it, and the spec last applied.

    `source` is `gitops:<name>` for a GitOps source, `kubernetes:…` for a custom resource, `api:<username>`
    (or a source a platform administrator named) for the API, `file:<path>` (or `--source`) for the console;
    `gitops.ownership` says who may change it. Pruning removes only a source's own objects; `applied` is what
    drift is measured against, and its keys are the fields the source declares (`core.declared`).
    """

    kind = models.CharField(max_length=20)
    name = models.CharField(max_length=63)
    source = models.CharField(max_length=200, db_index=True)
    applied = models.JSONField(default=dict, help_text="the spec as last applied (canonical form)")
    revision = models.CharField(max_length=64, blank=True, help_text="git commit it was applied from")
    applied_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["source", "kind", "name"]
        constraints = [models.UniqueConstraint(fields=["kind", "name"], name="managed_object_unique")]

    def __str__(self) -> str:
        return f"{self.kind} {self.name} (from {self.source})"


class GitSource(models.Model):
    """A git repository, branch and folder whose manifests gpucloud keeps applied.

    The periodic task fetches it every `interval` seconds (a signed webhook asks sooner), applies the whole
    commit in one transaction with pruning limited to this source's objects, and records the outcome here.
    """

    class State(models.TextChoices):
        PENDING = "pending"
        SYNCED = "synced"
        FAILED = "failed"

    public_id = PublicIdField(prefix="gs")
    name = models.SlugField(max_length=63, unique=True)
    url = models.CharField(max_length=500, help_text="https://, http:// or file:// git URL")
    branch = models.CharField(max_length=200, default="main")
    path = models.CharField(max_length=500, blank=True, help_text="folder in the repository; empty = all")
    interval = models.PositiveIntegerField(default=300, help_text="seconds between syncs")
    username = models.CharField(max_length=200, blank=True)
    password_ciphertext = models.TextField(blank=True, help_text="Fernet-encrypted password or token")
    webhook_secret_ciphertext = models.TextField(blank=True, help_text="Fernet-encrypted webhook secret")
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    last_revision = models.CharField(max_length=64, blank=True, help_text="the commit last applied")
    last_attempted_revision = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)
    problems = models.JSONField(default=list, blank=True, help_text="[{file, line, field, reason}]")
    drift = models.JSONField(default=list, blank=True, help_text="changes made outside git, restored")
    last_synced_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def owner(self) -> str:
        """The `ManagedObject.source` of the objects this source applies."""
        return f"gitops:{self.name}"


class WebhookDelivery(models.Model):
    """A push webhook a source accepted: its delivery id (where the forge sends one) and the digest of its
    body. The same delivery again is refused as a replay; rows older than `GITOPS_WEBHOOK_REPLAY_WINDOW` are
    forgotten by the periodic GitOps task."""

    source = models.ForeignKey(GitSource, on_delete=models.CASCADE, related_name="deliveries")
    delivery = models.CharField(max_length=100, blank=True, help_text="X-GitHub-Delivery and the like")
    digest = models.CharField(max_length=64, help_text="SHA-256 of the body, which the signature covers")
    received_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "digest"], name="webhook_delivery_unique_body"),
            models.UniqueConstraint(
                fields=["source", "delivery"],
                condition=~models.Q(delivery=""),
                name="webhook_delivery_unique_id",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source} {self.delivery or self.digest[:12]}"
