"""The checkpointer's tables come from ``manage.py migrate``, never from a worker's first use."""

from __future__ import annotations

import sqlite3
import threading
import uuid

import pytest
from django.db import connection

from agents.runtime import checkpoint

on_postgres = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="Postgres only: the embedded SQLite checkpointer is one local file whose DDL SQLite "
    "serialises (docs/guarantees.md)",
)


def test_migrate_creates_the_checkpoint_tables(db):
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass('checkpoints'), max(v) FROM checkpoint_migrations")
            table, version = cursor.fetchone()
        from langgraph.checkpoint.postgres import PostgresSaver

        assert table is not None and version == len(PostgresSaver.MIGRATIONS) - 1
    else:
        path = checkpoint.checkpoint_sqlite_path()
        with sqlite3.connect(path) as conn:
            names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        assert {"checkpoints", "writes"} <= names


@on_postgres
def test_a_worker_runs_no_checkpoint_ddl(db, monkeypatch):
    from langgraph.checkpoint.postgres import PostgresSaver

    def no_ddl(self):
        raise AssertionError("a worker must not create the checkpoint tables")

    monkeypatch.setattr(PostgresSaver, "setup", no_ddl)
    checkpoint.checkpointer_reset()
    try:
        assert checkpoint.checkpointer_get() is not None
    finally:
        checkpoint.checkpointer_reset()


@on_postgres
def test_a_worker_on_a_database_nobody_migrated_says_so_and_may_retry(db):
    from agents.runtime.failures import is_retryable

    schema = f"unmigrated_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE SCHEMA {schema}")
    db_settings = {**connection.settings_dict, "OPTIONS": {"options": f"-c search_path={schema}"}}
    with pytest.raises(checkpoint.CheckpointerNotReady, match="manage.py migrate") as caught:
        checkpoint._make_saver(db_settings)
    assert is_retryable(caught.value)


@on_postgres
def test_two_deployments_migrating_at_once_do_not_race_the_ddl(transactional_db):
    schema = f"race_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE SCHEMA {schema}")
    db_settings = {**connection.settings_dict, "OPTIONS": {"options": f"-c search_path={schema}"}}
    conninfo = checkpoint._postgres_conninfo(db_settings)
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def deploy() -> None:
        start.wait()
        try:
            checkpoint.postgres_setup(conninfo)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=deploy) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        saver, close = checkpoint._make_saver(db_settings)
        close()
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP SCHEMA {schema} CASCADE")
