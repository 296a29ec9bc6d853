"""The database refuses to change audit history (invariant 4).

Postgres: a row trigger refuses UPDATE and DELETE, a statement trigger refuses TRUNCATE.
SQLite: BEFORE UPDATE / BEFORE DELETE triggers abort.

The one exception is the test flush that Django runs between transactional tests; the pytest
plugin tests/audit_purge.py opens it (see docs/audit.md, "Test purge switch"):
- Postgres: DELETE/TRUNCATE pass only when the transaction-local setting audit.allow_purge is
  'on' AND the database is a test database (its name starts with "test_").
- SQLite: DELETE passes only while the one-row table audit_purge_switch holds a row. That table
  is not a Django model, so no ORM code path and no flush touches it.
UPDATE is refused always.
"""

from django.db import migrations

TABLE = "audit_auditevent"

PG_INSTALL = f"""
CREATE OR REPLACE FUNCTION audit_event_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'TRUNCATE')
       AND current_setting('audit.allow_purge', true) = 'on'
       AND current_database() LIKE 'test\\_%' THEN
        IF TG_OP = 'DELETE' THEN
            RETURN OLD;
        END IF;
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'audit events are append-only: % on {TABLE} refused', TG_OP
        USING ERRCODE = 'P0001';
END;
$$;
CREATE TRIGGER audit_event_no_update_delete
    BEFORE UPDATE OR DELETE ON {TABLE}
    FOR EACH ROW EXECUTE FUNCTION audit_event_refuse_change();
CREATE TRIGGER audit_event_no_truncate
    BEFORE TRUNCATE ON {TABLE}
    FOR EACH STATEMENT EXECUTE FUNCTION audit_event_refuse_change();
"""

PG_REMOVE = f"""
DROP TRIGGER IF EXISTS audit_event_no_truncate ON {TABLE};
DROP TRIGGER IF EXISTS audit_event_no_update_delete ON {TABLE};
DROP FUNCTION IF EXISTS audit_event_refuse_change();
"""

SQLITE_INSTALL = [
    "CREATE TABLE IF NOT EXISTS audit_purge_switch (id INTEGER PRIMARY KEY CHECK (id = 1))",
    f"""CREATE TRIGGER audit_event_no_update BEFORE UPDATE ON {TABLE}
        BEGIN SELECT RAISE(ABORT, 'audit events are append-only: UPDATE on {TABLE} refused'); END""",
    f"""CREATE TRIGGER audit_event_no_delete BEFORE DELETE ON {TABLE}
        WHEN NOT EXISTS (SELECT 1 FROM audit_purge_switch)
        BEGIN SELECT RAISE(ABORT, 'audit events are append-only: DELETE on {TABLE} refused'); END""",
]

SQLITE_REMOVE = [
    "DROP TRIGGER IF EXISTS audit_event_no_delete",
    "DROP TRIGGER IF EXISTS audit_event_no_update",
    "DROP TABLE IF EXISTS audit_purge_switch",
]


def _run(schema_editor, statements):
    for sql in statements:
        schema_editor.execute(sql, params=None)


def install(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _run(schema_editor, [PG_INSTALL])
    elif vendor == "sqlite":
        _run(schema_editor, SQLITE_INSTALL)
    else:
        raise RuntimeError(
            f"append-only triggers exist for postgresql and sqlite only, not {vendor}"
        )


def remove(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _run(schema_editor, [PG_REMOVE])
    elif vendor == "sqlite":
        _run(schema_editor, SQLITE_REMOVE)


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0002_export_manifest"),
    ]

    operations = [
        migrations.RunPython(install, remove),
    ]
