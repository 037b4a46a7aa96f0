# AuditEvent and IdempotencyRecord now belong to `core` (core 0001 takes them over in Django's state); the
# tables stay.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0009_h24_cache_table"),
        ("core", "0001_audit_and_idempotency_from_tenants"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.RemoveField(
                    model_name="idempotencyrecord",
                    name="user",
                ),
                migrations.DeleteModel(
                    name="AuditEvent",
                ),
                migrations.DeleteModel(
                    name="IdempotencyRecord",
                ),
            ],
        ),
    ]
