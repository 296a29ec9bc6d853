"""An index on (tool, at, seq) for the audit log's tool + date filter (docs/benchmarks.md,
"Pages at 10M approvals and 20M audit rows").

With a short date range the page takes the newest seqs of the range's rows from this index
alone (an index-only range scan: the tool's rows of those days, however long the chain), then
those rows by seq (audit.selectors.event_list_page), instead of walking the seq index back
from the head to the range. Built CONCURRENTLY on Postgres (non-atomic migration) so a large audit table keeps
taking writes; a plain CREATE INDEX elsewhere. The model's Meta.indexes names the same index.
"""

from django.db import migrations, models

INDEX = models.Index(fields=["tool", "at", "seq"], name="audit_tool_at_seq")


def forwards(apps, schema_editor):
    model = apps.get_model("audit", "AuditEvent")
    if schema_editor.connection.vendor != "postgresql":
        schema_editor.add_index(model, INDEX)
        return
    table = schema_editor.quote_name(model._meta.db_table)
    # A CREATE INDEX CONCURRENTLY that failed part way (a cancel, a deadlock) leaves an INVALID
    # index of this name, which IF NOT EXISTS would keep: drop it and build again.
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT NOT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = 'audit_tool_at_seq'"
        )
        row = cursor.fetchone()
    if row and row[0]:
        schema_editor.execute("DROP INDEX CONCURRENTLY audit_tool_at_seq")
    schema_editor.execute(
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_tool_at_seq ON {table} (tool, at, seq)"
    )


def backwards(apps, schema_editor):
    model = apps.get_model("audit", "AuditEvent")
    if schema_editor.connection.vendor != "postgresql":
        schema_editor.remove_index(model, INDEX)
        return
    schema_editor.execute("DROP INDEX CONCURRENTLY IF EXISTS audit_tool_at_seq")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("audit", "0006_actor_search_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddIndex(model_name="auditevent", index=INDEX)],
            database_operations=[migrations.RunPython(forwards, backwards)],
        )
    ]
