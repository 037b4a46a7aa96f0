# issue 27 (live): `SimulatedPod` becomes `Pod`, the one model of GPU pods on every host cluster, with the
# Kubernetes fields the live view writes (uid, phase, created and scheduled times) and `PodWatch`. The table
# keeps its name (workers_simulatedpod, set in Meta), so the rename moves no data; existing rows get uid ""
# and phase Running, or Succeeded where they have finished.

from typing import Any

import django.db.models.deletion
from django.db import migrations, models


def finished_phase(apps: Any, schema_editor: Any) -> None:
    Pod = apps.get_model("scheduling", "Pod")
    Pod.objects.filter(finished_at__isnull=False).update(phase="Succeeded")


class Migration(migrations.Migration):
    dependencies = [
        ("scheduling", "0011_hosts_node_gone_cluster_cordon"),
        ("tenants", "0001_initial"),
    ]

    operations = [
        migrations.RenameModel("SimulatedPod", "Pod"),
        migrations.RemoveConstraint(model_name="pod", name="simulated_pod_unique_name"),
        migrations.AddField(
            model_name="pod",
            name="uid",
            field=models.CharField(
                blank=True,
                help_text="metadata.uid on a Kubernetes host cluster; empty when simulated",
                max_length=64,
                default="",
            ),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="pod",
            name="phase",
            field=models.CharField(
                choices=[
                    ("Pending", "Pending"),
                    ("Running", "Running"),
                    ("Succeeded", "Succeeded"),
                    ("Failed", "Failed"),
                ],
                default="Running",
                max_length=10,
            ),
        ),
        migrations.AddField(
            model_name="pod",
            name="created_at",
            field=models.DateTimeField(blank=True, help_text="metadata.creationTimestamp", null=True),
        ),
        migrations.AddField(
            model_name="pod",
            name="scheduled_at",
            field=models.DateTimeField(blank=True, help_text="bound to its node", null=True),
        ),
        migrations.AlterField(
            model_name="pod",
            name="started_at",
            field=models.DateTimeField(db_index=True, help_text="holds its GPUs from"),
        ),
        migrations.AlterField(
            model_name="pod",
            name="finished_at",
            field=models.DateTimeField(blank=True, db_index=True, help_text="gave them back at", null=True),
        ),
        migrations.AddConstraint(
            model_name="pod",
            constraint=models.UniqueConstraint(
                fields=("host_cluster", "namespace", "name", "uid"), name="pod_unique_name"
            ),
        ),
        migrations.RunPython(finished_phase, migrations.RunPython.noop, elidable=True),
        migrations.CreateModel(
            name="PodWatch",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("resource_version", models.CharField(blank=True, max_length=64)),
                ("listed_at", models.DateTimeField(blank=True, null=True)),
                (
                    "events",
                    models.PositiveBigIntegerField(
                        default=0, help_text="watch events applied since registration"
                    ),
                ),
                (
                    "host_cluster",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="pod_watch",
                        to="scheduling.hostcluster",
                    ),
                ),
            ],
        ),
    ]
