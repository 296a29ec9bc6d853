"""audit migration 0006 never makes migrate fail: pg_trgm installed in a schema outside the
search path (hosted Postgres puts extensions in their own schema) still gets the trigram index,
named by that schema."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.db import connection

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="Postgres only: the migration does nothing on SQLite"
)

migration = importlib.import_module("audit.migrations.0006_actor_search_indexes")


def _valid_indexes() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = 'audit_auditevent'::regclass AND i.indisvalid"
        )
        return {name for (name,) in cursor.fetchall()}


def _forwards() -> None:
    with connection.schema_editor(atomic=False) as editor:
        migration.forwards(apps, editor)


def test_the_migration_indexes_the_actor_when_pg_trgm_lives_outside_the_search_path(
    transactional_db,
):
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX IF EXISTS audit_actor_upper_trgm")
        cursor.execute("DROP EXTENSION IF EXISTS pg_trgm")
        cursor.execute("CREATE SCHEMA IF NOT EXISTS trgm_elsewhere")
        cursor.execute("CREATE EXTENSION pg_trgm SCHEMA trgm_elsewhere")
    try:
        _forwards()

        assert {"audit_actor_username_upper", "audit_actor_upper_trgm"} <= _valid_indexes()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX IF EXISTS audit_actor_upper_trgm")
            cursor.execute("DROP EXTENSION IF EXISTS pg_trgm")
            cursor.execute("DROP SCHEMA IF EXISTS trgm_elsewhere")
        _forwards()  # as migrate left the database for the other tests
