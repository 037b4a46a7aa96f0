from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps


def sync(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    from fleet.services import sync_catalog

    sync_catalog(apps.get_model("scheduling", "GpuModel"), apps.get_model("scheduling", "GpuClass"))


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0001_initial")]
    operations = [migrations.RunPython(sync, migrations.RunPython.noop)]
