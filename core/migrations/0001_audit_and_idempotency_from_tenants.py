# AuditEvent and IdempotencyRecord move from `tenants` to `core` in Django's state only: the tables keep their
# names (tenants_auditevent, tenants_idempotencyrecord), columns, indexes, constraints and the audit log's
# append-only trigger, so no data moves.

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

import gpucloud.ids


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("tenants", "0009_h24_cache_table"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="AuditEvent",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("public_id", gpucloud.ids.PublicIdField(prefix="aud")),
                        (
                            "created_at",
                            models.DateTimeField(db_index=True, default=django.utils.timezone.now),
                        ),
                        (
                            "actor_label",
                            models.CharField(help_text="username, token or system process", max_length=150),
                        ),
                        ("action", models.CharField(db_index=True, max_length=60)),
                        ("object_type", models.CharField(max_length=40)),
                        ("object_id", models.CharField(max_length=120)),
                        ("before", models.JSONField(blank=True, null=True)),
                        ("after", models.JSONField(blank=True, null=True)),
                        ("request_id", models.CharField(blank=True, max_length=64)),
                        ("source_ip", models.CharField(blank=True, max_length=45)),
                        ("user_agent", models.CharField(blank=True, max_length=300)),
                        (
                            "actor",
                            models.ForeignKey(
                                blank=True,
                                db_constraint=False,
                                null=True,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "tenant",
                            models.ForeignKey(
                                blank=True,
                                db_constraint=False,
                                null=True,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="+",
                                to="tenants.tenant",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "tenants_auditevent",
                        "ordering": ["-created_at", "-id"],
                    },
                ),
                migrations.CreateModel(
                    name="IdempotencyRecord",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("key", models.CharField(max_length=200)),
                        (
                            "fingerprint",
                            models.CharField(help_text="hash of method, path and body", max_length=64),
                        ),
                        ("status_code", models.PositiveSmallIntegerField(null=True)),
                        ("body", models.JSONField(null=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "tenants_idempotencyrecord",
                        "constraints": [
                            models.UniqueConstraint(fields=("user", "key"), name="idempotency_unique_key")
                        ],
                    },
                ),
            ],
        ),
    ]
