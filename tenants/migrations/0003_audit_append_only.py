"""The audit log is append-only: PostgreSQL refuses every UPDATE and DELETE of tenants_auditevent.

A row trigger, not a rule, so the refusal is an error the writer sees rather than a silent no-op. TRUNCATE is
left alone (it is what a test run's flush and an operator's deliberate reset use). On SQLite, the embedded
default, nothing is installed: Django flushes SQLite with DELETE, which a trigger would break.
"""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

FORWARD = """
CREATE OR REPLACE FUNCTION gpucloud_audit_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only: %% on tenants_auditevent is refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER tenants_auditevent_append_only
    BEFORE UPDATE OR DELETE ON tenants_auditevent
    FOR EACH ROW EXECUTE FUNCTION gpucloud_audit_append_only();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS tenants_auditevent_append_only ON tenants_auditevent;
DROP FUNCTION IF EXISTS gpucloud_audit_append_only();
"""


def forward(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FORWARD)


def backward(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACKWARD)


class Migration(migrations.Migration):
    dependencies = [("tenants", "0002_identity_scopes_and_sources")]

    operations = [migrations.RunPython(forward, backward)]
