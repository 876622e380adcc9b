from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION readingroom_audit_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'annotation_auditevent is append-only: % refused', TG_OP;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER annotation_auditevent_append_only
    BEFORE UPDATE OR DELETE ON annotation_auditevent
    FOR EACH ROW EXECUTE FUNCTION readingroom_audit_append_only();
"""

DROP = """
DROP TRIGGER IF EXISTS annotation_auditevent_append_only ON annotation_auditevent;
DROP FUNCTION IF EXISTS readingroom_audit_append_only();
"""


def create_trigger(apps, schema_editor):
    # PostgreSQL only: row triggers there leave TRUNCATE (test database flushes) alone.
    if schema_editor.connection.vendor == "postgresql":
        # params=None: send the SQL as is; with params, psycopg would read PL/pgSQL's % as a placeholder.
        schema_editor.execute(CREATE, params=None)


def drop_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("annotation", "0002_builtin_datasets")]

    operations = [migrations.RunPython(create_trigger, drop_trigger)]
