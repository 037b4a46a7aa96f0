# A health credit's event is now `health.HealthEvent` (the same table): Django's state only.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0008_h24_money"),
        ("health", "0001_health_from_fleet"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name="healthcredit",
                    name="event",
                    field=models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="health.healthevent",
                    ),
                ),
            ],
        ),
    ]
