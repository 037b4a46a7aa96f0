"""Budget webhook URLs are kept encrypted at rest (gpucloud.crypto), like host-cluster kubeconfigs."""

from typing import Any

from django.db import migrations, models

from gpucloud import crypto


def encrypt_existing(apps: Any, schema_editor: Any) -> None:
    Budget = apps.get_model("billing", "Budget")
    for budget in Budget.objects.exclude(webhook_url=""):
        budget.webhook_url_ciphertext = crypto.encrypt(budget.webhook_url)
        budget.save(update_fields=["webhook_url_ciphertext"])


def decrypt_existing(apps: Any, schema_editor: Any) -> None:
    Budget = apps.get_model("billing", "Budget")
    for budget in Budget.objects.exclude(webhook_url_ciphertext=""):
        budget.webhook_url = crypto.decrypt(budget.webhook_url_ciphertext)
        budget.save(update_fields=["webhook_url"])


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0002_usage_hour"),
    ]

    operations = [
        migrations.AddField(
            model_name="budget",
            name="webhook_url_ciphertext",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.RunPython(encrypt_existing, decrypt_existing),
        migrations.RemoveField(
            model_name="budget",
            name="webhook_url",
        ),
    ]
