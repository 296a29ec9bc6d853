"""A database of its own for the entry point test: empty, so ``bin/console migrate`` builds it.

Postgres: a scratch database beside the test database on the same server, dropped afterwards.
SQLite: a file in the test's temporary directory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
from psycopg import sql


def _server_url(db: dict[str, Any], name: str) -> str:
    user = quote(db.get("USER") or "", safe="")
    password = quote(db.get("PASSWORD") or "", safe="")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = db.get("HOST") or "127.0.0.1"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{auth}{host}{port}/{quote(name, safe='')}"


@contextlib.contextmanager
def scratch_database(db: dict[str, Any], *, tmp_path: Path) -> Iterator[str]:
    """Yield the DATABASE_URL of a new, empty database; remove it on exit."""
    if db["ENGINE"].endswith("sqlite3"):
        yield f"sqlite:///{(tmp_path / 'console.sqlite3').resolve()}"
        return
    name = f"test_{Path(str(db['NAME'])).name.removeprefix('test_')}_entrypoint"
    with psycopg.connect(_server_url(db, "postgres"), autocommit=True) as admin:
        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        admin.execute(drop)
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield _server_url(db, name)
        finally:
            admin.execute(drop)
