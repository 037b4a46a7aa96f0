# SimulatedClock moves from the clusters app (label `workers`) to `simulator` in Django's state only: the
# table keeps its name (workers_simulatedclock), so no data moves.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("scheduling", "0008_h25_health_to_health"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="SimulatedClock",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("until", models.DateTimeField()),
                        (
                            "host_cluster",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="scheduling.hostcluster",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "workers_simulatedclock",
                    },
                ),
            ],
        ),
    ]
