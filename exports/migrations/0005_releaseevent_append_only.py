from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION readingroom_release_event_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'exports_releaseevent is append-only: % refused', TG_OP;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER exports_releaseevent_append_only
    BEFORE UPDATE OR DELETE ON exports_releaseevent
    FOR EACH ROW EXECUTE FUNCTION readingroom_release_event_append_only();
"""

DROP = """
DROP TRIGGER IF EXISTS exports_releaseevent_append_only ON exports_releaseevent;
DROP FUNCTION IF EXISTS readingroom_release_event_append_only();
"""


def create_trigger(apps, schema_editor):
    # As for the audit trail (annotation 0003): PostgreSQL only, and TRUNCATE (test flushes) stays allowed.
    if schema_editor.connection.vendor == "postgresql":
        # params=None: send the SQL as is; with params, psycopg would read PL/pgSQL's % as a placeholder.
        schema_editor.execute(CREATE, params=None)


def drop_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("exports", "0004_release_include_judges")]

    operations = [migrations.RunPython(create_trigger, drop_trigger)]
