"""Tamper tools for the audit tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection


@contextmanager
def triggers_disabled() -> Iterator[None]:
    """Switch the append-only triggers off inside the current transaction (tamper tests only);
    the test's rollback restores them."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("ALTER TABLE audit_auditevent DISABLE TRIGGER USER")
            yield
            cursor.execute("ALTER TABLE audit_auditevent ENABLE TRIGGER USER")
        else:
            cursor.execute("DROP TRIGGER audit_event_no_update")
            cursor.execute("DROP TRIGGER audit_event_no_delete")
            yield
            # Recreated by the rollback of the test's transaction (SQLite DDL is transactional).
