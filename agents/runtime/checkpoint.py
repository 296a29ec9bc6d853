"""The checkpointer: one PostgresSaver pool or one SqliteSaver connection per process, both
fenced by the run lease (``runtime.fenced_saver``), the compiled graphs bound to it, and thread
configs. On Postgres, ``CHECKPOINTER`` picks FastPostgresSaver (``runtime.fast_saver``, the
default) or FencedPostgresSaver (LangGraph's PostgresSaver plus the fence). Every one
of them is encrypted at rest under ENCRYPTION_KEYS (``runtime.at_rest``: its serde by default).

Created lazily, because the qcluster forks its workers after start-up and a pool or a sqlite
connection must not cross a fork. It follows Django's database choice (DESIGN.md: Databases).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connections
from langchain_core.messages import BaseMessage

if TYPE_CHECKING:
    from agents.runtime.registry import AgentSpec
    from approvals.models import AgentRun

_lock = threading.Lock()
_cache: dict[str, Any] = {"pid": None, "key": None, "saver": None, "closer": None}


def _db_settings() -> dict[str, Any]:
    return connections["default"].settings_dict


def checkpoint_sqlite_path(db: dict[str, Any] | None = None) -> Path:
    """The checkpoint file beside the SQLite database (or CHECKPOINT_SQLITE_PATH)."""
    if settings.CHECKPOINT_SQLITE_PATH:
        return Path(settings.CHECKPOINT_SQLITE_PATH)
    name = Path(str((db or _db_settings())["NAME"]))
    return name.with_name(f"{name.stem}-checkpoints.sqlite3")


def _postgres_conninfo(db: dict[str, Any]) -> str:
    from psycopg.conninfo import make_conninfo

    params = {
        "dbname": db["NAME"],
        "host": db.get("HOST") or None,
        "port": str(db["PORT"]) if db.get("PORT") else None,
        "user": db.get("USER") or None,
        "password": db.get("PASSWORD") or None,
        # e.g. {"options": "-c search_path=agents"}: the checkpoint tables follow Django's.
        "options": (db.get("OPTIONS") or {}).get("options") or None,
    }
    return make_conninfo(**{k: v for k, v in params.items() if v})


# pg_advisory_lock key held while the checkpointer's tables are created or upgraded.
SETUP_LOCK_KEY = 7_202_611_301


class CheckpointerNotReady(RuntimeError):
    """The checkpointer's tables are missing or older than this code (run ``manage.py
    migrate``). Retryable: during a deploy, workers may start before migrate finished."""


def checkpointer_setup(*, using: str = "default") -> None:
    """Create or upgrade the checkpointer's tables. ``manage.py migrate`` runs this (post_migrate),
    under an advisory lock on Postgres, so two deployments migrating at once cannot race the DDL;
    a worker never does it at first use."""
    db = connections[using].settings_dict
    if db["ENGINE"] == "django.db.backends.postgresql":
        postgres_setup(_postgres_conninfo(db))
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = checkpoint_sqlite_path(db)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=30)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        SqliteSaver(conn).setup()
    finally:
        conn.close()


def postgres_setup(conninfo: str) -> None:
    """Run PostgresSaver's migrations on ``conninfo``, one process at a time."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    with psycopg.connect(
        conninfo, autocommit=True, row_factory=dict_row, prepare_threshold=0
    ) as conn:
        # Poll with try-lock instead of blocking in pg_advisory_lock: a session blocked there
        # holds a snapshot that the holder's CREATE INDEX CONCURRENTLY waits for (deadlock).
        while not conn.execute(
            "SELECT pg_try_advisory_lock(%s) AS locked", [SETUP_LOCK_KEY]
        ).fetchone()["locked"]:
            time.sleep(0.2)
        try:
            PostgresSaver(conn).setup()
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", [SETUP_LOCK_KEY])


def _postgres_ready(pool: Any) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    latest = len(PostgresSaver.MIGRATIONS) - 1
    with pool.connection() as conn:
        found = conn.execute("SELECT to_regclass('checkpoint_migrations') AS t").fetchone()
        version = None
        if found and found["t"]:
            row = conn.execute("SELECT max(v) AS v FROM checkpoint_migrations").fetchone()
            version = row["v"] if row else None
    if version is None or version < latest:
        raise CheckpointerNotReady(
            f"the checkpoint tables are at migration {version}, this code needs {latest}: "
            "run `manage.py migrate`"
        )


def _make_saver(db: dict[str, Any]) -> tuple[Any, Any]:
    if db["ENGINE"] == "django.db.backends.postgresql":
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        from agents.runtime.fast_saver import FastPostgresSaver
        from agents.runtime.fenced_saver import FencedPostgresSaver

        saver_class = FastPostgresSaver if settings.CHECKPOINTER == "fast" else FencedPostgresSaver
        pool = ConnectionPool(
            _postgres_conninfo(db),
            min_size=1,
            max_size=settings.CHECKPOINT_POOL_SIZE,
            kwargs={"autocommit": True, "row_factory": dict_row, "prepare_threshold": 0},
            open=True,
        )
        try:
            _postgres_ready(pool)  # the tables come from migrate, never from a worker's DDL
        except BaseException:
            pool.close()
            raise
        return saver_class(pool), pool.close
    from agents.runtime.fenced_saver import FencedSqliteSaver

    # The embedded default: one local file, whose DDL (CREATE ... IF NOT EXISTS) SQLite
    # serialises; SqliteSaver creates its tables on first use whatever we do.
    path = checkpoint_sqlite_path(db)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=30000")
    # Deleted checkpoints are overwritten, not left in free pages (erasure, retention).
    conn.execute("PRAGMA secure_delete=ON")
    saver = FencedSqliteSaver(conn)
    saver.setup()
    return saver, conn.close


def checkpointer_get() -> Any:
    """This process's checkpointer for the current default database."""
    db = _db_settings()
    key = f"{db['ENGINE']}|{db.get('HOST')}|{db.get('PORT')}|{db['NAME']}|{settings.CHECKPOINTER}"
    pid = os.getpid()
    with _lock:
        if _cache["saver"] is not None and _cache["pid"] == pid and _cache["key"] == key:
            return _cache["saver"]
        if _cache["closer"] is not None and _cache["pid"] == pid:
            # Closing a stale pool must not block opening the new one.
            with contextlib.suppress(Exception):
                _cache["closer"]()
        saver, closer = _make_saver(db)
        _cache.update(pid=pid, key=key, saver=saver, closer=closer)
        return saver


def checkpointer_reset() -> None:
    """Drop this process's checkpointer (tests that switch databases)."""
    with _lock:
        if _cache["closer"] is not None and _cache["pid"] == os.getpid():
            _cache["closer"]()
        _cache.update(pid=None, key=None, saver=None, closer=None)


def checkpointer_ready() -> None:
    """Raise CheckpointerNotReady unless this process's checkpointer reads its tables (/readyz).

    On Postgres the tables must be at LangGraph's latest migration (checked again, not only
    when the pool was made); on both, one read of a thread that does not exist."""
    try:
        saver = checkpointer_get()
        pool = getattr(saver, "conn", None)
        if pool is not None and hasattr(pool, "connection"):  # a psycopg pool: Postgres
            _postgres_ready(pool)
        saver.get_tuple({"configurable": {"thread_id": "readyz-probe", "checkpoint_ns": ""}})
    except CheckpointerNotReady:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure means "not ready", with its reason
        raise CheckpointerNotReady(f"{type(exc).__name__}: {exc}") from exc


# --- compiled graphs and thread configs ---------------------------------------------------------

_graphs: dict[tuple[str, str, int], tuple[Any, Any]] = {}
_graphs_lock = threading.Lock()


def graph_for(spec: AgentSpec) -> Any:
    """The compiled graph of an agent version, bound to this process's checkpointer."""
    saver = checkpointer_get()
    key = (spec.name, spec.version, id(saver))
    with _graphs_lock:
        cached = _graphs.get(key)
        if cached is None or cached[0] is not spec:  # re-registered: build it again
            cached = (spec, spec.factory(checkpointer=saver))
            _graphs[key] = cached
        return cached[1]


def thread_config(run: AgentRun, *, version: str | None = None) -> dict[str, Any]:
    """The LangGraph config of the run's thread; with ``version``, the one a step writes under."""
    config: dict[str, Any] = {"configurable": {"thread_id": run.thread_id}}
    if version is not None:
        # Also LangChain's run metadata: callbacks (LangSmith) group traces by thread and run.
        config["metadata"] = {
            "graph_version": version,
            "run_id": str(run.id),
            "thread_id": run.thread_id,
        }
        config["recursion_limit"] = settings.RUN_MAX_STEPS + 5
    return config


def jsonable(value: Any) -> Any:
    """State values as plain JSON (messages become {type, content, tool_calls})."""
    if isinstance(value, BaseMessage):
        out: dict[str, Any] = {"type": value.type, "content": value.content}
        if getattr(value, "tool_calls", None):
            out["tool_calls"] = value.tool_calls
        return jsonable(out)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "model_dump"):
        return jsonable(value.model_dump(mode="json"))
    return str(value)
