"""The shared cache's table (gpucloud/cache.py): rate limits and sign-in lock-outs count there when no Redis
cache is configured. Made here, not by a separate `createcachetable`, so that every way of migrating (`gpucloud
migrate`, `make run`, the tests) has it, on PostgreSQL and SQLite alike, whatever GPUCLOUD_CACHE_URL says now."""

from django.core.management.commands.createcachetable import Command as CreateCacheTable
from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

from gpucloud.cache import TABLE


def create(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    command = CreateCacheTable()
    command.verbosity = 0
    command.create_table(schema_editor.connection.alias, TABLE, dry_run=False)  # skipped if it exists


def drop(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    schema_editor.execute(f"DROP TABLE IF EXISTS {schema_editor.quote_name(TABLE)}")


class Migration(migrations.Migration):
    dependencies = [("tenants", "0008_h24_token_source")]

    operations = [migrations.RunPython(create, drop)]
