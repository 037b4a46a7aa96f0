# SimulatedClock now belongs to `simulator` (simulator 0001 takes it over in Django's state); the table stays.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("workers", "0006_portal2_observed_workloads"),
        ("simulator", "0001_clock_from_clusters"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(
                    name="SimulatedClock",
                ),
            ],
        ),
    ]
