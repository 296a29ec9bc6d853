"""A database of its own for the entry point test: empty, so ``bin/console migrate`` builds it.

Postgres: a scratch database beside the test database on the same server, dropped afterwards.
SQLite: a file in the test's temporary directory. Redis (the queue and cache of compose.yaml):
databases of the local server that no other test uses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import redis
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


# Redis databases of their own (compose.yaml's /0 and /1 are the queue and the cache), one pair
# per database engine so the Postgres and SQLite runs of the suite never share a queue.
REDIS_DATABASES = {"postgresql": (12, 13), "sqlite3": (14, 15)}
QUEUE_KEY = "django_q:console:q"  # django-q2's list for the cluster named "console"


@contextlib.contextmanager
def scratch_redis(db: dict[str, Any], *, host: str = "127.0.0.1", port: int = 6379):
    """Yield (REDIS_URL, CACHE_URL) on databases this test owns; their keys are removed
    before (a killed earlier run's leftovers) and after."""
    queue_db, cache_db = REDIS_DATABASES[db["ENGINE"].rsplit(".", 1)[-1]]
    queue = redis.Redis(host=host, port=port, db=queue_db)
    cache = redis.Redis(host=host, port=port, db=cache_db)

    def tidy() -> None:
        queue.delete(QUEUE_KEY)
        stale = list(cache.scan_iter(match=":1:*"))  # Django's cache keys (prefix "", version 1)
        if stale:
            cache.delete(*stale)

    tidy()
    try:
        yield f"redis://{host}:{port}/{queue_db}", f"redis://{host}:{port}/{cache_db}"
    finally:
        tidy()
        queue.close()
        cache.close()
