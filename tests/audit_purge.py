"""pytest plugin: lets Django's test flush empty the append-only audit table.

Transactional tests (pytest-django's ``transactional_db``, ``live_server``) end with a flush:
TRUNCATE on Postgres, DELETE on SQLite. The audit triggers refuse both (invariant 4). This
plugin wraps the flush, and only the flush, in the purge switch that the triggers honour:

- Postgres: ``set_config('audit.allow_purge', 'on', true)``, local to the flush's transaction;
  the trigger also requires a test database (name starting with ``test_``).
- SQLite: a row in ``audit_purge_switch`` (not a Django model), inserted before the flush's
  DELETEs and removed after them, in the same transaction.

Enable it once in tests/conftest.py: ``pytest_plugins = ["tests.audit_purge"]``.
Nothing outside the test suite may use the switch (docs/audit.md).
"""

from __future__ import annotations

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


def pytest_configure(config: Any) -> None:
    install()
