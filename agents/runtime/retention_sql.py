"""The checkpoint tables' side of retention: bounded, set-based SQL over a batch of threads.

Postgres: LangGraph's PostgresSaver tables (checkpoints, checkpoint_blobs, checkpoint_writes),
in the database Django uses, so the deletes run on Django's connection inside the pass's
transaction: they commit (or roll back) with the runs recorded as pruned and the audit event.
SQLite: SqliteSaver's own file (checkpoints, writes; values inline), through the checkpointer's
connection and lock, committed just before the pass's transaction (a failure in between leaves
runs pruned but unrecorded, which the next pass prunes again, finding nothing more to delete).

"The final checkpoint" of a namespace is the fence's head (``runtime.fenced_saver``): the
newest of the highest lease epoch, which is what ``get_state`` reads, not merely the newest id.
LangGraph's own ``PostgresSaver.prune`` keeps the newest id, which could be a stale worker's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import connection
from langgraph.checkpoint.serde.types import TASKS

from agents.runtime.checkpoint import checkpoint_sqlite_path, checkpointer_get
from agents.runtime.fenced_saver import _PG_EPOCH, _SQLITE_EPOCH

try:  # the Postgres saver's own test for threads using a DeltaChannel (its prune refuses them)
    from langgraph.checkpoint.postgres.base import PRUNE_DELTA_THREADS_SQL
except ImportError:  # pragma: no cover - a new langgraph-checkpoint-postgres
    raise ImportError(
        "langgraph.checkpoint.postgres.base.PRUNE_DELTA_THREADS_SQL moved: review "
        "agents/runtime/retention_sql.py"
    ) from None

PG_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
SQLITE_TABLES = ("checkpoints", "writes")


@dataclass
class Deleted:
    """Rows one prune removed."""

    checkpoints: int = 0
    writes: int = 0
    blobs: int = 0

    def __iadd__(self, other: Deleted) -> Deleted:
        self.checkpoints += other.checkpoints
        self.writes += other.writes
        self.blobs += other.blobs
        return self


def _postgres() -> bool:
    return connection.vendor == "postgresql"


# --- Postgres ----------------------------------------------------------------------------------

# Each namespace's head (the fence's order), plus the parent a head older than format 4 reads
# its pending sends from (as PostgresSaver.prune keeps it).
_PG_KEPT = f"""
WITH heads AS (
    SELECT DISTINCT ON (thread_id, checkpoint_ns)
        thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id,
        (checkpoint ->> 'v')::int AS v
    FROM checkpoints
    WHERE thread_id = ANY(%s)
    ORDER BY thread_id, checkpoint_ns, {_PG_EPOCH} DESC, checkpoint_id DESC
)
SELECT thread_id, checkpoint_ns, checkpoint_id FROM heads
UNION
SELECT h.thread_id, h.checkpoint_ns, h.parent_checkpoint_id FROM heads h
WHERE h.v < 4 AND h.parent_checkpoint_id IS NOT NULL AND EXISTS (
    SELECT 1 FROM checkpoint_writes w
    WHERE w.thread_id = h.thread_id AND w.checkpoint_ns = h.checkpoint_ns
        AND w.checkpoint_id = h.parent_checkpoint_id AND w.channel = '{TASKS}'
)
"""

_PG_NOT_KEPT = """NOT EXISTS (
    SELECT 1 FROM unnest(%s::text[], %s::text[], %s::text[]) AS k(t, n, c)
    WHERE k.t = {alias}.thread_id AND k.n = {alias}.checkpoint_ns AND k.c = {alias}.checkpoint_id
)"""

_PG_PRUNE = (
    (
        "writes",
        "DELETE FROM checkpoint_writes w WHERE w.thread_id = ANY(%s) AND "
        + _PG_NOT_KEPT.format(alias="w"),
    ),
    (
        "checkpoints",
        "DELETE FROM checkpoints c WHERE c.thread_id = ANY(%s) AND "
        + _PG_NOT_KEPT.format(alias="c"),
    ),
)
# As PostgresSaver.prune: a kept checkpoint whose parent is gone has none.
_PG_UNPARENT = """
UPDATE checkpoints c SET parent_checkpoint_id = NULL
WHERE c.thread_id = ANY(%s) AND c.parent_checkpoint_id IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM checkpoints p
    WHERE p.thread_id = c.thread_id AND p.checkpoint_ns = c.checkpoint_ns
        AND p.checkpoint_id = c.parent_checkpoint_id
)"""
# Blobs no remaining checkpoint of the thread refers to (by channel version).
_PG_BLOBS = """
DELETE FROM checkpoint_blobs b
WHERE b.thread_id = ANY(%s) AND NOT EXISTS (
    SELECT 1 FROM checkpoints c
    WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns
        AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version
)"""


def _pg_prune_final(threads: list[str]) -> Deleted:
    with connection.cursor() as cur:
        cur.execute(_PG_KEPT, [threads])
        kept = cur.fetchall()
        columns = [list(col) for col in zip(*kept, strict=True)] if kept else [[], [], []]
        deleted = Deleted()
        for field, sql in _PG_PRUNE:
            cur.execute(sql, [threads, *columns])
            setattr(deleted, field, cur.rowcount)
        cur.execute(_PG_UNPARENT, [threads])
        cur.execute(_PG_BLOBS, [threads])
        deleted.blobs = cur.rowcount
    return deleted


def _pg_delete(threads: list[str]) -> Deleted:
    deleted = Deleted()
    with connection.cursor() as cur:
        for field, table in (
            ("checkpoints", "checkpoints"),
            ("writes", "checkpoint_writes"),
            ("blobs", "checkpoint_blobs"),
        ):
            cur.execute(f"DELETE FROM {table} WHERE thread_id = ANY(%s)", [threads])
            setattr(deleted, field, cur.rowcount)
    return deleted


def _pg_delta_threads(threads: list[str]) -> set[str]:
    with connection.cursor() as cur:
        cur.execute(PRUNE_DELTA_THREADS_SQL, [threads, threads])
        return {row[0] for row in cur.fetchall()}


# --- SQLite ------------------------------------------------------------------------------------


def _sqlite_heads(marks: str) -> str:
    return f"""SELECT thread_id, checkpoint_ns, checkpoint_id FROM (
        SELECT thread_id, checkpoint_ns, checkpoint_id, ROW_NUMBER() OVER (
            PARTITION BY thread_id, checkpoint_ns
            ORDER BY {_SQLITE_EPOCH} DESC, checkpoint_id DESC
        ) AS rank
        FROM checkpoints WHERE thread_id IN ({marks})
    ) WHERE rank = 1"""


def _sqlite_run(statements: Sequence[tuple[str | None, str, Sequence[Any]]]) -> Deleted:
    """The statements in one transaction of the checkpointer's connection, under its lock."""
    saver = checkpointer_get()
    deleted = Deleted()
    with saver.lock:
        conn = saver.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            for field, sql, params in statements:
                cur = conn.execute(sql, params)
                if field is not None:
                    setattr(deleted, field, getattr(deleted, field) + cur.rowcount)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
    return deleted


# Threads per statement: a statement binds its list up to twice, and stock SQLite builds bind
# at most 32766 parameters (SQLITE_MAX_VARIABLE_NUMBER), whatever CHECKPOINT_PRUNE_BATCH says.
SQLITE_CHUNK = 500


def _chunks(threads: list[str]) -> list[list[str]]:
    return [threads[i : i + SQLITE_CHUNK] for i in range(0, len(threads), SQLITE_CHUNK)]


def _sqlite_prune_final(threads: list[str]) -> Deleted:
    return _sqlite_run([s for chunk in _chunks(threads) for s in _sqlite_final_statements(chunk)])


def _sqlite_final_statements(threads: list[str]) -> list[tuple[str | None, str, Sequence[Any]]]:
    marks = ",".join("?" * len(threads))
    heads = _sqlite_heads(marks)
    not_kept = f"(thread_id, checkpoint_ns, checkpoint_id) NOT IN ({heads})"
    return [
        (
            "writes",
            f"DELETE FROM writes WHERE thread_id IN ({marks}) AND {not_kept}",
            [*threads, *threads],
        ),
        (
            "checkpoints",
            f"DELETE FROM checkpoints WHERE thread_id IN ({marks}) AND {not_kept}",
            [*threads, *threads],
        ),
        (
            None,
            f"""UPDATE checkpoints SET parent_checkpoint_id = NULL
                WHERE thread_id IN ({marks}) AND parent_checkpoint_id IS NOT NULL AND NOT EXISTS (
                    SELECT 1 FROM checkpoints p WHERE p.thread_id = checkpoints.thread_id
                        AND p.checkpoint_ns = checkpoints.checkpoint_ns
                        AND p.checkpoint_id = checkpoints.parent_checkpoint_id)""",
            threads,
        ),
    ]


def _sqlite_delete(threads: list[str]) -> Deleted:
    statements: list[tuple[str | None, str, Sequence[Any]]] = []
    for chunk in _chunks(threads):
        marks = ",".join("?" * len(chunk))
        statements += [
            ("checkpoints", f"DELETE FROM checkpoints WHERE thread_id IN ({marks})", chunk),
            ("writes", f"DELETE FROM writes WHERE thread_id IN ({marks})", chunk),
        ]
    return _sqlite_run(statements)


def _sqlite_delta_threads(threads: list[str]) -> set[str]:
    meta = "CAST(metadata AS TEXT)"
    found: set[str] = set()
    saver = checkpointer_get()
    with saver.cursor(transaction=False) as cur:
        for chunk in _chunks(threads):
            marks = ",".join("?" * len(chunk))
            cur.execute(
                f"SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id IN ({marks}) AND ("
                f"json_type({meta}, '$.counters_since_delta_snapshot') IS NOT NULL OR "
                f"json_type({meta}, '$.delta_writes_versioned') IS NOT NULL)",
                chunk,
            )
            found.update(row[0] for row in cur.fetchall())
    return found


# --- the interface -----------------------------------------------------------------------------


def threads_prune_final(threads: Sequence[str]) -> Deleted:
    """Keep each namespace's final checkpoint (with its writes and the blobs it refers to);
    delete the rest of these threads' checkpoints, writes and blobs."""
    threads = [str(t) for t in threads]
    if not threads:
        return Deleted()
    return _pg_prune_final(threads) if _postgres() else _sqlite_prune_final(threads)


def threads_delete(threads: Sequence[str]) -> Deleted:
    """Delete every checkpoint, write and blob of these threads (``delete_thread``, batched)."""
    threads = [str(t) for t in threads]
    if not threads:
        return Deleted()
    return _pg_delete(threads) if _postgres() else _sqlite_delete(threads)


def threads_using_delta_channels(threads: Sequence[str]) -> set[str]:
    """Threads whose state a DeltaChannel rebuilds from older checkpoints: pruning those to
    the final checkpoint would silently empty that channel, so they are never pruned."""
    threads = [str(t) for t in threads]
    if not threads:
        return set()
    return _pg_delta_threads(threads) if _postgres() else _sqlite_delta_threads(threads)


def checkpoint_tables() -> list[dict[str, Any]]:
    """The checkpoint tables: name, bytes on disk, rows, and whether rows is an estimate."""
    if _postgres():
        with connection.cursor() as cur:
            cur.execute(
                """SELECT t.name, pg_total_relation_size(c.oid), c.reltuples, s.n_live_tup
                FROM unnest(%s::text[]) WITH ORDINALITY AS t(name, i)
                JOIN pg_class c ON c.oid = to_regclass(t.name)
                LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
                ORDER BY t.i""",
                [list(PG_TABLES)],
            )
            return [
                {
                    "name": name,
                    "bytes": size,
                    # The statistics' live rows; the planner's estimate once they are reset.
                    "rows": int(live if live else max(reltuples, 0)),
                    "estimate": True,
                }
                for name, size, reltuples, live in cur.fetchall()
            ]
    saver = checkpointer_get()
    tables = []
    with saver.cursor(transaction=False) as cur:
        for name in SQLITE_TABLES:
            cur.execute(f"SELECT count(*) FROM {name}")  # noqa: S608 - a fixed table name
            tables.append(
                {"name": name, "bytes": None, "rows": cur.fetchone()[0], "estimate": False}
            )
    return tables


def checkpoint_files() -> list[dict[str, Any]]:
    """SQLite: the checkpoint file and its write-ahead log, with their sizes (Postgres: [])."""
    if _postgres():
        return []
    path = checkpoint_sqlite_path()
    files = []
    for suffix in ("", "-wal"):
        file = Path(f"{path}{suffix}")
        files.append({"name": str(file), "bytes": file.stat().st_size if file.exists() else 0})
    return files
