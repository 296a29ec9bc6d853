"""Search the whole database for plaintext: every column of every table (text, JSON, binary),
and on SQLite the checkpoint file and its write-ahead log too.

``database_scan(needles)`` returns ``{"table.column": [needle, ...]}`` for each place a needle
was found; ``"checkpoints (SQLite file)"`` names the checkpoint store's bytes.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection

from agents.runtime.checkpoint import checkpoint_sqlite_path
from tests.support.at_rest import sqlite_raw

_PG_TYPES = ("text", "character varying", "character", "json", "jsonb", "bytea")


def _pg_columns() -> list[tuple[str, str, str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND data_type = ANY(%s)"
            " AND table_name IN (SELECT table_name FROM information_schema.tables"
            "   WHERE table_schema = current_schema() AND table_type = 'BASE TABLE')"
            " ORDER BY table_name, column_name",
            [list(_PG_TYPES)],
        )
        return cursor.fetchall()


def _sqlite_columns() -> list[tuple[str, str, str]]:
    columns = []
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        for (table,) in cursor.fetchall():
            cursor.execute(f'PRAGMA table_info("{table}")')
            columns += [(table, row[1], row[2]) for row in cursor.fetchall()]
    return columns


def _found(table: str, column: str, data_type: str, needle: str) -> bool:
    qn = connection.ops.quote_name
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            if data_type == "bytea":
                where = f"position(convert_to(%s, 'UTF8') in {qn(column)}) > 0"
            else:
                where = f"strpos({qn(column)}::text, %s) > 0"
        else:  # any column may hold text or bytes in SQLite: compare bytes
            where = f"instr(CAST({qn(column)} AS BLOB), CAST(%s AS BLOB)) > 0"
        cursor.execute(f"SELECT 1 FROM {qn(table)} WHERE {where} LIMIT 1", [needle])  # noqa: S608
        return cursor.fetchone() is not None


def database_scan(needles: Iterable[str]) -> dict[str, list[str]]:
    """Where each needle occurs (table.column -> needles), the checkpoint store included."""
    needles = list(needles)
    columns = _pg_columns() if connection.vendor == "postgresql" else _sqlite_columns()
    found: dict[str, list[str]] = {}
    for table, column, data_type in columns:
        hits = [n for n in needles if _found(table, column, data_type, n)]
        if hits:
            found[f"{table}.{column}"] = hits
    if connection.vendor == "sqlite":  # the checkpointer's own file (Postgres: tables above)
        raw = sqlite_raw(checkpoint_sqlite_path())
        hits = [n for n in needles if n.encode() in raw]
        if hits:
            found["checkpoints (SQLite file)"] = hits
    return found


def tables_of(found: dict[str, list[str]]) -> set[str]:
    return {place.split(".")[0] for place in found}
