from django.db import migrations


def sync(apps, schema_editor):
    from fleet.services import sync_catalog

    sync_catalog(apps.get_model("scheduling", "GpuModel"), apps.get_model("scheduling", "GpuClass"))


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0001_initial")]
    operations = [migrations.RunPython(sync, migrations.RunPython.noop)]
