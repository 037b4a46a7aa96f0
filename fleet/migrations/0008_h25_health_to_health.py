# HealthEvent and Quarantine now belong to `health` (health 0001 takes them over in Django's state); the
# tables stay.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0009_h25_health_credit_event_in_health"),
        ("scheduling", "0007_health"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.RemoveField(
                    model_name="quarantine",
                    name="event",
                ),
                migrations.RemoveField(
                    model_name="quarantine",
                    name="gpu",
                ),
                migrations.RemoveField(
                    model_name="quarantine",
                    name="node",
                ),
                migrations.DeleteModel(
                    name="HealthEvent",
                ),
                migrations.DeleteModel(
                    name="Quarantine",
                ),
            ],
        ),
    ]
