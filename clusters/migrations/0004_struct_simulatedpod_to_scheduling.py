# SimulatedPod now belongs to `scheduling` (scheduling 0004 takes it over in Django's state); the table stays.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("workers", "0003_simulator_bookkeeping"),
        ("scheduling", "0004_struct_simulatedpod_from_workers"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[migrations.DeleteModel(name="SimulatedPod")],
        ),
    ]
