from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.models import AuditEvent
from fleet.models import GpuClass
from gpucloud.api.serializers import ModelSerializer, model_field
from tenants.models import ApiToken, Invitation, Membership, Quota, Tenant, TenantCluster
from tenants.tokens import SCOPES


class ClusterAccessSerializer(serializers.Serializer[TenantCluster]):
    """Whether the bindings inside the tenant's cluster reflect its latest membership change."""

    in_sync = serializers.BooleanField(source="access_in_sync", help_text="the cluster reflects every change")
    synced_at = serializers.DateTimeField(
        source="access_synced_at", allow_null=True, help_text="when it last came to reflect them"
    )
    message = serializers.CharField(
        source="access_message", help_text="why the last attempt failed, if it did"
    )


class TenantClusterSerializer(ModelSerializer[TenantCluster]):
    host_cluster = serializers.CharField(source="host_cluster.name")
    access = ClusterAccessSerializer(source="*", read_only=True)

    class Meta:
        model = TenantCluster
        fields = ["host_cluster", "namespace", "state", "endpoint", "message", "observed_at", "access"]


class TenantSerializer(ModelSerializer[Tenant]):
    id = serializers.CharField(source="public_id", read_only=True)
    cluster = TenantClusterSerializer(read_only=True)
    host_cluster = serializers.CharField(
        write_only=True, required=False, help_text="host cluster name; gpucloud picks one when omitted"
    )
    dedicated_nodes = serializers.SerializerMethodField(
        help_text="isolated tenants: the host nodes dedicated to it, labelled and tainted "
        "gpucloud.io/tenant=<slug> (docs/kubernetes.md, 'Dedicated nodes'); a node stays listed until it is "
        "returned, once none of its pods runs there"
    )

    class Meta:
        model = Tenant
        fields = [
            "id",
            "slug",
            "display_name",
            "trust_tier",
            "state",
            "state_reason",
            "cluster",
            "host_cluster",
            "dedicated_nodes",
            "sleep_after_inactivity",
            "sleep_when_idle",
            "idle_since",
            "asleep_since",
            "created_at",
            "updated_at",
            "deleted_at",
        ]
        read_only_fields = [
            "state",
            "state_reason",
            "sleep_after_inactivity",
            "sleep_when_idle",
            "idle_since",
            "asleep_since",
            "created_at",
            "updated_at",
            "deleted_at",
        ]
        extra_kwargs = {
            # Validation of the slug (form, uniqueness) is the service's; the serializer only carries it,
            # untrimmed: "ab\n" is refused, never quietly created as "ab".
            "slug": {"validators": [], "trim_whitespace": False},
            "display_name": {"required": False},
            "trust_tier": {"required": False},
        }

    def get_dedicated_nodes(self, tenant: Tenant) -> list[str]:
        return sorted(d.node.name for d in tenant.dedicated_nodes.all())


class TenantUpdateSerializer(serializers.Serializer[None]):
    display_name = model_field(Tenant, "display_name", required=False, allow_blank=True)
    trust_tier = serializers.CharField(
        required=False, max_length=Tenant._meta.get_field("trust_tier").max_length
    )
    sleep_after_inactivity = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=Tenant._meta.get_field("sleep_after_inactivity").max_length,
        help_text="vCluster sleep mode after this long without requests (45m, 2h); empty: the host cluster's",
    )
    sleep_when_idle = serializers.BooleanField(
        required=False, help_text="put the cluster to sleep when its GPUs were idle for the idle window"
    )


class MemberSerializer(ModelSerializer[Membership]):
    username = serializers.CharField(source="user.username")
    role = serializers.CharField()

    class Meta:
        model = Membership
        fields = ["username", "role", "source", "created_at"]
        read_only_fields = ["source", "created_at"]


class InvitationSerializer(ModelSerializer[Invitation]):
    """A role waiting for someone without an account yet: theirs at their first sign-in."""

    class Meta:
        model = Invitation
        fields = ["login", "role", "created_at"]


class MemberRoleSerializer(serializers.Serializer[None]):
    role = serializers.CharField()


class QuotaSerializer(ModelSerializer[Quota]):
    """The numbers and their ranges come from the model (tenants.models.Quota)."""

    gpu_class = serializers.CharField(
        source="gpu_class.name", max_length=GpuClass._meta.get_field("name").max_length
    )

    class Meta:
        model = Quota
        fields = ["gpu_class", "guaranteed", "burst", "lendable", "weight", "updated_at"]
        read_only_fields = ["updated_at"]
        extra_kwargs = {
            "guaranteed": {"required": True},
            "burst": {"default": 0},
            "lendable": {"default": None},
            "weight": {"default": 1, "min_value": 1},
        }


class QuotaValuesSerializer(QuotaSerializer):
    """The body of PUT /quotas/{gpu_class}/: the class comes from the URL."""

    class Meta(QuotaSerializer.Meta):
        fields = ["guaranteed", "burst", "lendable", "weight", "updated_at"]


class AuditChangeSerializer(serializers.Serializer[dict[str, Any]]):
    """One field a write changed: its value before and after (null where that side has none)."""

    field = serializers.CharField()
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)


class AuditEventSerializer(ModelSerializer[AuditEvent]):
    id = serializers.CharField(source="public_id")
    changes = AuditChangeSerializer(many=True, read_only=True)
    actor = serializers.CharField(source="actor_label")
    tenant: serializers.SlugRelatedField[Tenant] = serializers.SlugRelatedField(
        slug_field="slug",
        read_only=True,
        allow_null=True,  # platform-wide events belong to no tenant
    )

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "created_at",
            "actor",
            "tenant",
            "action",
            "object_type",
            "object_id",
            "before",
            "after",
            "changes",
            "request_id",
            "source_ip",
            "user_agent",
        ]


class TokenSerializer(ModelSerializer[ApiToken]):
    """A token as listed: never its secret."""

    id = serializers.CharField(source="public_id", read_only=True)
    user = serializers.CharField(source="user.username", read_only=True)
    tenant = serializers.CharField(source="tenant.slug", read_only=True, allow_null=True, default=None)
    created_by = serializers.CharField(
        source="created_by.username", read_only=True, allow_null=True, default=None
    )

    class Meta:
        model = ApiToken
        fields = [
            "id",
            "name",
            "scope",
            "source",
            "user",
            "tenant",
            "prefix",
            "created_by",
            "created_at",
            "expires_at",
            "revoked_at",
            "last_used_at",
            "last_used_ip",
        ]
        read_only_fields = fields


class TokenCreateSerializer(serializers.Serializer[None]):
    name = serializers.CharField(max_length=100)
    scope = serializers.ChoiceField(choices=list(SCOPES), default=ApiToken.Scope.READ)
    expires_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
    source = serializers.CharField(  # type: ignore[assignment]
        required=False,
        allow_blank=True,
        default="",
        max_length=100,
        help_text="the manifest source POST /apply/ applies as with this token, and only that one (platform "
        "administrators only); empty: api:<the token's user>",
    )


class ScimTokenCreateSerializer(serializers.Serializer[None]):
    name = serializers.CharField(max_length=100, help_text="the identity provider it is for, e.g. okta")
    expires_at = serializers.DateTimeField(required=False, allow_null=True, default=None)


class TokenCreatedSerializer(TokenSerializer):
    """The answer to creating a token: the only time its text is shown."""

    token = serializers.SerializerMethodField()

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "token"]
        read_only_fields = fields

    def get_token(self, row: ApiToken) -> str:
        return str(self.context["token"])
