"""pytest plugin: lets Django's test flush empty the append-only audit table.

Transactional tests (pytest-django's ``transactional_db``, ``live_server``) end with a flush:
TRUNCATE on Postgres, DELETE on SQLite. The audit triggers refuse both (invariant 4). This
plugin wraps the flush, and only the flush, in the purge switch that the triggers honour:

- Postgres: ``set_config('audit.allow_purge', 'on', true)``, local to the flush's transaction;
  the trigger also requires a test database (name starting with ``test_``).
- SQLite: a row in ``audit_purge_switch`` (not a Django model), inserted before the flush's
  DELETEs and removed after them, in the same transaction.

Enable it once in tests/conftest.py: ``pytest_plugins = ["tests.audit_purge"]``.
Nothing outside the test suite may use the switch (docs/audit.md). ``tables_empty()`` goes
through the same flush for a test that needs an empty database more than once (the examples of
a hypothesis state machine).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

AUDIT_TABLE = "audit_auditevent"
_installed = False


def _purge_wrapped(sql_list: list[str], vendor: str) -> list[str]:
    if not any(AUDIT_TABLE in sql for sql in sql_list):
        return sql_list
    if vendor == "postgresql":
        return ["SELECT set_config('audit.allow_purge', 'on', true)", *sql_list]
    if vendor == "sqlite":
        return [
            "INSERT OR IGNORE INTO audit_purge_switch (id) VALUES (1)",
            *sql_list,
            "DELETE FROM audit_purge_switch",
        ]
    return sql_list


def install() -> None:
    """Wrap BaseDatabaseOperations.execute_sql_flush (idempotent)."""
    global _installed
    if _installed:
        return
    from django.db.backends.base.operations import BaseDatabaseOperations

    original = BaseDatabaseOperations.execute_sql_flush

    def execute_sql_flush(self: Any, sql_list: list[str]) -> None:
        return original(self, _purge_wrapped(list(sql_list), self.connection.vendor))

    BaseDatabaseOperations.execute_sql_flush = execute_sql_flush
    _installed = True


def tables_empty(
    *, keep: Iterable[str] = ("django_migrations", "django_content_type", "auth_permission")
) -> None:
    """Empty every Django table but ``keep``, through the flush (and so the purge switch).

    DELETE rather than TRUNCATE: for a few rows it is far faster on Postgres, and foreign keys
    are checked at commit (Django declares them deferred).
    """
    from django.db import connection

    ops = connection.ops
    tables = set(connection.introspection.django_table_names(only_existing=True)) - set(keep)
    ops.execute_sql_flush([f"DELETE FROM {ops.quote_name(table)}" for table in sorted(tables)])


def pytest_configure(config: Any) -> None:
    install()
