# HealthEvent and Quarantine move from the fleet app (label `scheduling`) to `health` in Django's state only:
# the tables keep their names (scheduling_healthevent, scheduling_quarantine), so no data moves.

import django.db.models.deletion
from django.db import migrations, models

import gpucloud.ids


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("scheduling", "0007_health"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="HealthEvent",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("public_id", gpucloud.ids.PublicIdField(prefix="he")),
                        (
                            "subject",
                            models.CharField(help_text="`node`, or `gpu:<index>` for a GPU", max_length=20),
                        ),
                        (
                            "signal",
                            models.CharField(
                                help_text="xid, ecc_dbe, gpu_missing, node_not_ready, …", max_length=80
                            ),
                        ),
                        ("value", models.CharField(blank=True, max_length=200)),
                        (
                            "severity",
                            models.CharField(
                                choices=[("info", "Info"), ("warning", "Warning"), ("fatal", "Fatal")],
                                max_length=10,
                            ),
                        ),
                        (
                            "action",
                            models.CharField(help_text="what the rule did: none, quarantine", max_length=20),
                        ),
                        (
                            "recommended",
                            models.CharField(
                                blank=True, help_text="reset GPU, reboot node, …", max_length=40
                            ),
                        ),
                        ("message", models.CharField(blank=True, max_length=500)),
                        (
                            "source",
                            models.CharField(
                                choices=[
                                    ("dcgm", "Dcgm"),
                                    ("kubernetes", "Kubernetes"),
                                    ("nvsentinel", "Nvsentinel"),
                                ],
                                max_length=12,
                            ),
                        ),
                        ("first_seen", models.DateTimeField()),
                        ("last_seen", models.DateTimeField()),
                        ("closed_at", models.DateTimeField(blank=True, db_index=True, null=True)),
                        (
                            "occurrences",
                            models.PositiveIntegerField(
                                default=1, help_text="times it came back before it closed"
                            ),
                        ),
                        (
                            "gpu",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="health_events",
                                to="scheduling.gpu",
                            ),
                        ),
                        (
                            "host_cluster",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="scheduling.hostcluster",
                            ),
                        ),
                        (
                            "node",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="health_events",
                                to="scheduling.node",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "scheduling_healthevent",
                        "ordering": ["-first_seen", "id"],
                    },
                ),
                migrations.CreateModel(
                    name="Quarantine",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "reason",
                            models.CharField(
                                help_text="short, a taint value: xid-79, gpu-missing, …", max_length=63
                            ),
                        ),
                        ("started_at", models.DateTimeField()),
                        ("released_at", models.DateTimeField(blank=True, null=True)),
                        ("released_by", models.CharField(blank=True, max_length=150)),
                        ("release_reason", models.CharField(blank=True, max_length=300)),
                        (
                            "event",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to="health.healthevent",
                            ),
                        ),
                        (
                            "gpu",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="quarantines",
                                to="scheduling.gpu",
                            ),
                        ),
                        (
                            "node",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="quarantines",
                                to="scheduling.node",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "scheduling_quarantine",
                        "ordering": ["-started_at", "id"],
                    },
                ),
                migrations.AddConstraint(
                    model_name="healthevent",
                    constraint=models.UniqueConstraint(
                        condition=models.Q(("closed_at__isnull", True)),
                        fields=("node", "subject", "signal"),
                        name="health_event_one_open_per_signal",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="quarantine",
                    constraint=models.UniqueConstraint(
                        condition=models.Q(("released_at__isnull", True)),
                        fields=("node", "gpu"),
                        name="quarantine_one_open_per_target",
                        nulls_distinct=False,
                    ),
                ),
            ],
        ),
    ]
