from __future__ import annotations

from typing import Any

from rest_framework import serializers

from gitops.models import GitSource
from gpucloud.api.serializers import ModelSerializer


class ApplySerializer(serializers.Serializer[None]):
    """Manifests to apply, as JSON objects (the same documents `manage.py apply` reads from YAML)."""

    documents = serializers.ListField(child=serializers.JSONField(), max_length=1000)
    dryRun = serializers.BooleanField(default=False)
    prune = serializers.BooleanField(default=False, help_text="platform administrators only")
    source = serializers.CharField(  # type: ignore[assignment]
        required=False,
        max_length=100,
        help_text="who owns what is applied; pruning removes only this source's objects. Left out, it is "
        "api:<your username> (or the source your token is bound to); naming another is for platform "
        "administrators, and gitops:…, kubernetes:… and api:… cannot be named",
    )
    takeOwnership = serializers.BooleanField(
        default=False,
        help_text="take objects another source manages over for this one instead of refusing them; platform "
        "administrators only, audited as ownership.take",
    )


class FieldChangeSerializer(serializers.Serializer[dict[str, Any]]):
    path = serializers.CharField(help_text="a spec field, or a list item: quotas[h200-141gb], members[alice]")
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)


# Declared through type(): a field called `fields` would otherwise shadow the serializer's own attribute.
ChangeSerializer = type(
    "ChangeSerializer",
    (serializers.Serializer,),
    {
        "kind": serializers.CharField(),
        "name": serializers.CharField(),
        "action": serializers.ChoiceField(choices=["create", "update", "delete", "withdraw", "release"]),
        "fields": FieldChangeSerializer(many=True),
    },
)


class OwnershipMoveSerializer(serializers.Serializer[dict[str, Any]]):
    action = serializers.ChoiceField(choices=["claim", "take", "release"])
    kind = serializers.CharField()
    name = serializers.CharField()
    previous = serializers.CharField(allow_null=True, help_text="the source that owned it before")
    source = serializers.CharField(  # type: ignore[assignment]
        allow_null=True, help_text="the source that owns it now"
    )


class ApplyResultSerializer(serializers.Serializer[dict[str, Any]]):
    dryRun = serializers.BooleanField()
    changed = serializers.BooleanField()
    changes = ChangeSerializer(many=True)
    source = serializers.CharField(  # type: ignore[assignment]
        help_text="the source the documents were applied as"
    )
    ownership = OwnershipMoveSerializer(many=True, help_text="what this apply changed about who owns what")


class KindSerializer(serializers.Serializer[dict[str, Any]]):
    kind = serializers.CharField()
    url = serializers.URLField()


class WebhookAnswerSerializer(serializers.Serializer[dict[str, Any]]):
    queued = serializers.BooleanField()
    reason = serializers.CharField(required=False)
    pong = serializers.BooleanField(required=False)


class GitSourceSerializer(ModelSerializer[GitSource]):
    """A GitOps source. The password and the webhook secret are written, kept encrypted, and never shown."""

    id = serializers.CharField(source="public_id", read_only=True)
    password = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=1000)
    webhook_secret = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=200)
    has_password = serializers.SerializerMethodField()
    has_webhook_secret = serializers.SerializerMethodField()

    class Meta:
        model = GitSource
        fields = [
            "id",
            "name",
            "url",
            "branch",
            "path",
            "interval",
            "username",
            "password",
            "webhook_secret",
            "has_password",
            "has_webhook_secret",
            "state",
            "last_revision",
            "last_attempted_revision",
            "error",
            "problems",
            "drift",
            "last_synced_at",
            "last_attempt_at",
        ]
        read_only_fields = [
            "state",
            "last_revision",
            "last_attempted_revision",
            "error",
            "problems",
            "drift",
            "last_synced_at",
            "last_attempt_at",
        ]
        # The service answers a taken name with a 409, as everywhere else.
        extra_kwargs: dict[str, dict[str, list[object]]] = {"name": {"validators": []}}

    def get_has_password(self, source: GitSource) -> bool:
        return bool(source.password_ciphertext)

    def get_has_webhook_secret(self, source: GitSource) -> bool:
        return bool(source.webhook_secret_ciphertext)
