"""The database keeps the effects ledger as append-only as the audit trail (invariant 1).

A ledger row is the claim that an effect happened (or may have) under its key: deleting it
would re-arm the effect, and changing its key, run, tool, args or fingerprint would let another
call pass as this one. Only the outcome columns (status, result, error, attempts, updated_at)
may change.

Postgres: a row trigger refuses DELETE and an UPDATE of an identity column; a statement trigger
refuses TRUNCATE. SQLite: BEFORE DELETE / BEFORE UPDATE OF triggers abort. The test flush
passes through the same switch as the audit trail (tests/audit_purge.py, docs/audit.md).
"""

from django.db import migrations

from agents.migrations._append_only import install, remove


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0003_time_travel_permission"),
        # The SQLite purge switch table (audit_purge_switch) is created there.
        ("audit", "0003_append_only_triggers"),
    ]

    operations = [
        migrations.RunPython(install, remove),
    ]
