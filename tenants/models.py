"""Tenants, their members, clusters and quotas, API tokens and the audit log."""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone

from fleet.models import GpuClass, GpuModel, HostCluster, Node
from gpucloud.ids import PublicIdField

SLUG_RE = r"^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$"
slug_validator = RegexValidator(
    SLUG_RE,
    "A slug is 1-40 characters of lowercase letters, digits and hyphens, starting with a letter and not "
    "ending with a hyphen (it becomes part of Kubernetes names).",
)


class InvalidTransition(Exception):
    """A state change the tenant state machine does not allow."""


class Tenant(models.Model):
    """A team sharing the GPU cloud: its members, one tenant cluster, its quotas.

    `state` is the lifecycle: pending → provisioning → ready ⇄ suspended (resume goes back through
    provisioning) → deleting → deleted, and failed (with `state_reason`) from pending or provisioning.
    """

    class TrustTier(models.TextChoices):
        ISOLATED = "isolated"
        STANDARD = "standard"
        TRUSTED = "trusted"

    class State(models.TextChoices):
        PENDING = "pending"
        PROVISIONING = "provisioning"
        READY = "ready"
        SUSPENDED = "suspended"
        DELETING = "deleting"
        DELETED = "deleted"
        FAILED = "failed"

    TRANSITIONS: ClassVar[dict[str, set[str]]] = {
        "pending": {"provisioning", "failed", "deleting"},
        "provisioning": {"ready", "failed", "deleting"},
        "ready": {"suspended", "deleting", "provisioning"},
        "suspended": {"provisioning", "deleting"},
        "failed": {"pending", "deleting"},
        "deleting": {"deleted"},
        "deleted": set(),
    }

    public_id = PublicIdField(prefix="ten")
    slug = models.CharField(max_length=40, unique=True, validators=[slug_validator])
    display_name = models.CharField(max_length=200)
    trust_tier = models.CharField(max_length=10, choices=TrustTier.choices, default=TrustTier.STANDARD)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    state_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    # Idle clusters (docs/kubernetes.md, "Idle clusters asleep"): the tenant's own vCluster sleep-mode delay,
    # whether gpucloud may put its cluster to sleep once metering finds its GPUs idle, and what it found.
    sleep_after_inactivity = models.CharField(
        max_length=20, blank=True, help_text="vCluster sleep mode, e.g. 2h or 45m; empty = the host cluster's"
    )
    sleep_when_idle = models.BooleanField(
        default=False, help_text="put the cluster to sleep when its GPUs were idle for the idle window"
    )
    idle_since = models.DateTimeField(null=True, blank=True, help_text="flagged idle: GPUs idle since")
    asleep_since = models.DateTimeField(null=True, blank=True, help_text="put to sleep by gpucloud at")
    woken_at = models.DateTimeField(null=True, blank=True, help_text="last woken: idleness counts from here")
    # Counts membership changes (bumped by the services in their transaction, on this row, which membership
    # changes lock anyway); the access pass records on the cluster the generation it applied.
    access_generation = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def desired(self) -> str:
        """What the tenant cluster should be: running, suspended or absent."""
        if self.state in (self.State.DELETING, self.State.DELETED):
            return "absent"
        if self.state == self.State.SUSPENDED:
            return "suspended"
        return "running"

    def can_become(self, state: str) -> bool:
        return state in self.TRANSITIONS[self.state]

    def transition(self, state: str, reason: str = "") -> None:
        """Change state in memory, refusing what the state machine forbids; the caller saves."""
        if not self.can_become(state):
            allowed = ", ".join(sorted(self.TRANSITIONS[self.state])) or "nothing"
            raise InvalidTransition(
                f"tenant {self.slug} is {self.state} and cannot become {state}; from {self.state} it can "
                f"become: {allowed}"
            )
        self.state = state
        self.state_reason = reason
        if state == self.State.DELETED:
            self.deleted_at = timezone.now()


class Membership(models.Model):
    """A person's role in a tenant, and where it came from.

    `source` says who owns the row: `manual` rows are granted in gpucloud and kept; `sso` rows follow the
    identity provider's groups and are re-synced at every sign-in; `token` rows belong to a tenant service
    token's account and go with the token.
    """

    class Role(models.TextChoices):
        OWNER = "owner"
        ADMIN = "admin"
        MEMBER = "member"
        VIEWER = "viewer"
        BILLING = "billing"

    class Source(models.TextChoices):
        MANUAL = "manual"
        SSO = "sso"
        TOKEN = "token"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.MANUAL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant", "user__username"]
        constraints = [models.UniqueConstraint(fields=["tenant", "user"], name="membership_unique_user")]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} of {self.tenant}"


class TenantCluster(models.Model):
    """The tenant's Kubernetes API in a host cluster: its host namespace, endpoint and observed state."""

    State = Tenant.State  # the observed cluster goes through the same states as the tenant

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="cluster")
    host_cluster = models.ForeignKey(HostCluster, on_delete=models.PROTECT, related_name="tenant_clusters")
    namespace = models.CharField(max_length=63)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    endpoint = models.CharField(max_length=300, blank=True)
    message = models.TextField(blank=True)
    observed_at = models.DateTimeField(null=True, blank=True)
    # Access inside the vCluster (clusters/access/rbac.py): the hash of the memberships the cluster reflects,
    # when it was last confirmed, and why the last attempt failed, if it did.
    access_synced_generation = models.PositiveIntegerField(default=0)
    access_hash = models.CharField(max_length=16, blank=True)
    access_synced_at = models.DateTimeField(null=True, blank=True)
    access_attempted_at = models.DateTimeField(null=True, blank=True)
    access_message = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"{self.namespace}@{self.host_cluster}"

    @property
    def access_in_sync(self) -> bool:
        """Whether the cluster reflects the latest membership change (bindings inside the vCluster)."""
        return self.access_synced_at is not None and (
            self.access_synced_generation >= self.tenant.access_generation
        )


class Quota(models.Model):
    """How much of a GPU class a tenant is guaranteed, may burst to, and lends out."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="quotas")
    gpu_class = models.ForeignKey(GpuClass, on_delete=models.PROTECT, related_name="quotas")
    guaranteed = models.PositiveIntegerField(default=0)
    burst = models.PositiveIntegerField(default=0, help_text="units above guaranteed it may borrow")
    lendable = models.PositiveIntegerField(
        null=True, blank=True, help_text="units of its guarantee others may borrow; empty = all"
    )
    weight = models.PositiveIntegerField(default=1, help_text="fair-share weight")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant", "gpu_class__name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "gpu_class"], name="quota_unique_class")]

    def __str__(self) -> str:
        return f"{self.tenant}/{self.gpu_class}"


class AdmissionLock(models.Model):
    """One row per (host cluster, GPU model) that quota admission locks (`tenants.capacity.lock_admission`).

    Every class of a model holds whole GPUs of it, so guarantees of all its classes on one host cluster are
    admitted one at a time. The row holds no data: it exists to be locked.
    """

    host_cluster = models.ForeignKey(HostCluster, on_delete=models.CASCADE, related_name="+")
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["host_cluster", "gpu_model"], name="admission_lock_unique")
        ]

    def __str__(self) -> str:
        return f"admission of {self.gpu_model} on {self.host_cluster}"


class DedicatedNode(models.Model):
    """A host node dedicated to an isolated tenant (docs/kubernetes.md, "Dedicated nodes").

    Written only by the dedication pass (`placement.dedication`), read by the placement model, by quota
    admission (an isolated tenant's guarantee takes whole nodes) and by the reconciler, which labels and
    taints the node `gpucloud.io/tenant=<slug>:NoSchedule`. Sticky: a node stays its tenant's until the pass
    returns it, which it does only once none of the tenant's pods runs there.
    """

    node = models.OneToOneField(Node, on_delete=models.CASCADE, related_name="dedication")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="dedicated_nodes")
    dedicated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["node__name"]

    def __str__(self) -> str:
        return f"{self.node} dedicated to {self.tenant}"


class ApiToken(models.Model):
    """A bearer token: only a lookup prefix and an HMAC of it are kept; the token is shown once.

    A personal token acts as its user. A tenant service token (`tenant` set) acts as an account of its own
    that holds one role in that tenant and nothing else; `created_by` is the person who made it.
    `scope` caps what any token may do, whatever its user's roles: `read` only reads, `write` also changes,
    `admin` also manages members and tokens. `source`, when set, is the one manifest source the token applies
    as (`gitops.ownership.request_source`). A `scim` token is another kind: an identity provider's, made by
    a platform administrator for an account of its own; it works at `/scim/v2/` and nowhere else.
    """

    class Scope(models.TextChoices):
        READ = "read"
        WRITE = "write"
        ADMIN = "admin"
        SCIM = "scim"

    public_id = PublicIdField(prefix="tok")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    tenant = models.ForeignKey(
        Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="service_tokens"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    name = models.CharField(max_length=100)
    # Tokens made before scopes existed could do everything their user could; new ones choose (API: read).
    scope = models.CharField(max_length=10, choices=Scope.choices, default=Scope.ADMIN)
    source = models.CharField(
        max_length=100,
        blank=True,
        help_text="the manifest source POST /apply/ applies as with this token (set by a platform "
        "administrator); empty: api:<its user>",
    )
    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    last_used_ip = models.CharField(max_length=45, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class Identity(models.Model):
    """A user's account at an OpenID provider: users are matched by (issuer, `sub`), never by e-mail."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="identities")
    issuer = models.CharField(max_length=300)
    subject = models.CharField(max_length=255)
    groups = models.JSONField(default=list, help_text="the groups claim at the last sign-in")
    created_at = models.DateTimeField(auto_now_add=True)
    last_login_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "identities"
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="identity_unique_subject")]

    def __str__(self) -> str:
        return f"{self.subject}@{self.issuer}"


class Invitation(models.Model):
    """A role in a tenant waiting for someone who has no account yet, by username or e-mail address.

    It becomes a `manual` membership at that person's first sign-in (password or single sign-on), and is
    kept, with `accepted_at` and `user`, as the record of it.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="invitations")
    login = models.CharField(max_length=254, help_text="the username or e-mail address invited")
    role = models.CharField(max_length=10, choices=Membership.Role.choices)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    accepted_at = models.DateTimeField(null=True, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["tenant", "login"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "login"],
                condition=models.Q(accepted_at__isnull=True),
                name="invitation_one_pending_per_login",
            )
        ]

    def __str__(self) -> str:
        return f"{self.login} invited as {self.role} of {self.tenant}"


class ScimUser(models.Model):
    """A person as the identity provider provisions them over SCIM (`tenants.scim`, docs/scim.md).

    The account itself is the Django user: its username, names, e-mail and active flag are the SCIM
    `userName`, `name`, primary e-mail and `active`. This row adds what SCIM needs besides: the opaque id,
    the provider's `externalId`, and the resource's other attributes as the provider sent them (title,
    phone numbers, the enterprise extension…), kept so they read back unchanged; gpucloud uses none of them.
    Accounts made by single sign-on get a row too, so the provider can find and adopt them.
    """

    public_id = PublicIdField(prefix="scu")
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="scim")
    external_id = models.CharField(max_length=255, blank=True, db_index=True)
    display_name = models.CharField(max_length=255, blank=True)
    attributes = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    version = models.PositiveIntegerField(default=1, help_text="bumped at every write: the SCIM ETag")

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.public_id} ({self.user})"


class ScimGroup(models.Model):
    """A group the identity provider pushes over SCIM, with its members.

    Its `display_name` is read like a name in the groups claim of a sign-in (`OIDC_TENANT_GROUP_PATTERN`,
    `OIDC_ADMIN_GROUPS`): being a member of `gpucloud:vision:member` makes one a member of tenant vision.
    """

    public_id = PublicIdField(prefix="scg")
    display_name = models.CharField(max_length=255)
    external_id = models.CharField(max_length=255, blank=True, db_index=True)
    members = models.ManyToManyField(ScimUser, related_name="groups", blank=True)
    attributes = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    version = models.PositiveIntegerField(default=1, help_text="bumped at every write: the SCIM ETag")

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(Lower("display_name"), name="scim_group_unique_display_name")]

    def __str__(self) -> str:
        return self.display_name
