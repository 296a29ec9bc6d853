"""Indexes for the audit log's actor filter (Postgres only; docs/benchmarks.md, "Pages at 10M
approvals and 20M audit rows").

The filter is ``UPPER(actor_username) = UPPER(x) OR UPPER(actor) LIKE UPPER('%x%')``
(audit.selectors.event_filter): without indexes on both sides of the OR, Postgres walks the
whole table backwards by seq (5 s at 2M rows, a minute at 20M) whenever few rows match. A
btree on UPPER(actor_username) and a trigram GIN index on UPPER(actor) let it combine two
index scans. pg_trgm is a trusted extension (Postgres 13+), so the database owner may create
it; where that is refused the trigram index is left out and the filter stays a scan.
Built CONCURRENTLY (non-atomic migration) so a large audit table keeps taking writes.
"""

from django.db import migrations

TABLE = "audit_auditevent"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_actor_username_upper "
            f"ON {TABLE} (UPPER(actor_username))"
        )
        if _trgm_schema(cursor) is None:
            try:
                cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            except Exception:  # noqa: BLE001 - no privilege: the filter works, unindexed
                return
        # The operator class named by its schema: the extension may live outside the search
        # path (hosted Postgres keeps extensions in a schema of their own).
        schema = schema_editor.connection.ops.quote_name(_trgm_schema(cursor))
        cursor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_actor_upper_trgm "
            f"ON {TABLE} USING gin (UPPER(actor) {schema}.gin_trgm_ops)"
        )


def _trgm_schema(cursor):
    cursor.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'pg_trgm'"
    )
    row = cursor.fetchone()
    return row[0] if row else None


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("DROP INDEX CONCURRENTLY IF EXISTS audit_actor_upper_trgm")
        cursor.execute("DROP INDEX CONCURRENTLY IF EXISTS audit_actor_username_upper")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("audit", "0005_chain_version"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
