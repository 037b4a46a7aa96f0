# SimulatedPod moves from `workers` to `scheduling` in Django's state only: the table keeps its name
# (workers_simulatedpod), its columns, indexes and constraints, so no data moves.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scheduling", "0003_kubernetes_host_clusters"),
        ("tenants", "0001_initial"),
        ("workers", "0003_simulator_bookkeeping"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="SimulatedPod",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("namespace", models.CharField(max_length=63)),
                        ("name", models.CharField(max_length=253)),
                        (
                            "gpu_uuids",
                            models.JSONField(
                                default=list, help_text="physical GPUs held (the parent GPU for a MIG slice)"
                            ),
                        ),
                        (
                            "gpu_instance_id",
                            models.PositiveSmallIntegerField(blank=True, help_text="MIG GPU_I_ID", null=True),
                        ),
                        (
                            "gpu_milli",
                            models.PositiveIntegerField(
                                default=1000, help_text="share of each GPU held, of 1000"
                            ),
                        ),
                        ("started_at", models.DateTimeField(db_index=True)),
                        ("finished_at", models.DateTimeField(blank=True, db_index=True, null=True)),
                        (
                            "ends_at",
                            models.DateTimeField(
                                blank=True,
                                help_text="when the simulator will end it; finished_at is set then",
                                null=True,
                            ),
                        ),
                        (
                            "mig_layout",
                            models.JSONField(
                                blank=True,
                                default=list,
                                help_text="MIG layout of its GPU; gpu_instance_id indexes it",
                            ),
                        ),
                        (
                            "gpu_class",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="scheduling.gpuclass",
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
                                related_name="+",
                                to="scheduling.node",
                            ),
                        ),
                        (
                            "tenant",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to="tenants.tenant",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "workers_simulatedpod",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("host_cluster", "namespace", "name"), name="simulated_pod_unique_name"
                            )
                        ],
                    },
                ),
            ],
        ),
    ]
