"""Shared by migrations 0004 and later: the database keeps the effects ledger as append-only as the audit trail (invariant 1).

A ledger row is the claim that an effect happened (or may have) under its key: deleting it
would re-arm the effect, and changing its key, run, tool, args or fingerprint would let another
call pass as this one. Only the outcome columns (status, result, error, attempts, updated_at)
may change.

Postgres: a row trigger refuses DELETE and an UPDATE of an identity column; a statement trigger
refuses TRUNCATE. SQLite: BEFORE DELETE / BEFORE UPDATE OF triggers abort. The test flush
passes through the same switch as the audit trail (tests/audit_purge.py, docs/audit.md).
"""

TABLE = "agents_effect"
IDENTITY = ("key", "run_id", "tool", "args", "args_fingerprint", "compensates_id", "created_at")

_changed = " OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in IDENTITY)

PG_INSTALL = f"""
CREATE OR REPLACE FUNCTION effect_refuse_change() RETURNS trigger
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
    IF TG_OP = 'UPDATE' THEN
        IF {_changed} THEN
            RAISE EXCEPTION 'the effects ledger is append-only: changing a claim''s identity is refused'
                USING ERRCODE = 'P0001';
        END IF;
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'the effects ledger is append-only: % on {TABLE} refused', TG_OP
        USING ERRCODE = 'P0001';
END;
$$;
CREATE TRIGGER effect_no_delete_no_identity_change
    BEFORE UPDATE OR DELETE ON {TABLE}
    FOR EACH ROW EXECUTE FUNCTION effect_refuse_change();
CREATE TRIGGER effect_no_truncate
    BEFORE TRUNCATE ON {TABLE}
    FOR EACH STATEMENT EXECUTE FUNCTION effect_refuse_change();
"""

PG_REMOVE = f"""
DROP TRIGGER IF EXISTS effect_no_truncate ON {TABLE};
DROP TRIGGER IF EXISTS effect_no_delete_no_identity_change ON {TABLE};
DROP FUNCTION IF EXISTS effect_refuse_change();
"""

_sqlite_changed = " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in IDENTITY)
SQLITE_INSTALL = [
    f"""CREATE TRIGGER effect_no_identity_change BEFORE UPDATE OF {", ".join(IDENTITY)} ON {TABLE}
        WHEN {_sqlite_changed}
        BEGIN SELECT RAISE(ABORT, 'the effects ledger is append-only: changing a claim''s identity is refused'); END""",
    f"""CREATE TRIGGER effect_no_delete BEFORE DELETE ON {TABLE}
        WHEN NOT EXISTS (SELECT 1 FROM audit_purge_switch)
        BEGIN SELECT RAISE(ABORT, 'the effects ledger is append-only: DELETE on {TABLE} refused'); END""",
]

SQLITE_REMOVE = [
    "DROP TRIGGER IF EXISTS effect_no_delete",
    "DROP TRIGGER IF EXISTS effect_no_identity_change",
]


def install(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(PG_INSTALL, params=None)
    elif vendor == "sqlite":
        for sql in SQLITE_INSTALL:
            schema_editor.execute(sql, params=None)
    else:
        raise RuntimeError(
            f"append-only triggers exist for postgresql and sqlite only, not {vendor}"
        )


def remove(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(PG_REMOVE, params=None)
    elif vendor == "sqlite":
        for sql in SQLITE_REMOVE:
            schema_editor.execute(sql, params=None)


def sqlite_reinstall(apps, schema_editor):
    """Re-create the SQLite triggers: SQLite rebuilds a table for some schema changes (a NOT
    NULL column, a changed field), and a rebuilt table has no triggers. Every later migration
    that alters agents_effect ends with this."""
    if schema_editor.connection.vendor == "sqlite":
        for sql in SQLITE_REMOVE + SQLITE_INSTALL:
            schema_editor.execute(sql, params=None)
