"""FastPostgresSaver: FencedPostgresSaver with one query per read and no lock around a pool.

Measured per step (bench/checkpointer.py, docs/benchmarks.md "The checkpointer per step"):

- PostgresSaver already sends a ``put`` (its blobs and the checkpoint row) and a
  ``put_writes`` each as one psycopg pipeline: one round trip each. Writing either as a single
  statement measured no faster, so the writes here are PostgresSaver's own.
- A read of the head was two queries with the fence (the head's id, then PostgresSaver's read
  of that row). Here it is one: the row is chosen in the fence's order (highest lease epoch,
  then newest). PostgresSaver's second query for a checkpoint of a format before 4 (its
  parent's pending sends, migrated into it) is a subquery of the same one.
- PostgresSaver holds one lock around every statement, needed for a single shared connection
  but not for a pool, where each call borrows its own connection. Without it, a task's
  ``put_writes`` and the next checkpoint's ``put``, which LangGraph submits to its background
  threads side by side, run at once: the step waits for the longer of the two, not their sum.
  LangGraph orders only the ``put`` calls among themselves (and waits for the writes of delta
  channels before a ``put``); it never relied on this lock to order writes and checkpoints.

The tables, rows and reads are PostgresSaver's, so either saver reads what the other wrote;
both seal what they write and store no channel value inline (``runtime.at_rest``).
``CHECKPOINTER=postgres`` selects FencedPostgresSaver instead (``runtime.checkpoint``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple, get_checkpoint_id
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.serde.types import TASKS
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from agents.runtime.fenced_saver import _PG_EPOCH, FencedPostgresSaver

_FROM = "\nfrom checkpoints "
if _FROM not in PostgresSaver.SELECT_SQL:  # pragma: no cover - a new langgraph-checkpoint-postgres
    raise ImportError("PostgresSaver.SELECT_SQL changed shape: review agents/runtime/fast_saver.py")

# PostgresSaver's SELECT_SQL with its SELECT_PENDING_SENDS_SQL as one more column (the same
# filter and order, evaluated only for the old formats that need it), so a read is one query
# whatever the checkpoint's format.
_SELECT_SQL = PostgresSaver.SELECT_SQL.replace(
    _FROM,
    f""",
    case when (checkpoint ->> 'v')::int < 4 and parent_checkpoint_id is not null then (
        select array_agg(array[ps.type::bytea, ps.blob] order by ps.task_path, ps.task_id, ps.idx)
        from checkpoint_writes ps
        where ps.thread_id = checkpoints.thread_id
            and ps.checkpoint_id = checkpoints.parent_checkpoint_id
            and ps.channel = '{TASKS}'
    ) end as pending_sends{_FROM}""",
)
_HEAD = f" ORDER BY {_PG_EPOCH} DESC, checkpoint_id DESC LIMIT 1"


class FastPostgresSaver(FencedPostgresSaver):
    """The lease fence; reads in one query; calls on a pool run side by side."""

    def get_tuple(self, config: Any) -> CheckpointTuple | None:
        conf = config["configurable"]
        thread_id = conf["thread_id"]
        ns = conf.get("checkpoint_ns", "")
        checkpoint_id = get_checkpoint_id(config)
        where = "WHERE thread_id = %s AND checkpoint_ns = %s"
        args: tuple[Any, ...] = (thread_id, ns)
        if checkpoint_id:
            where += " AND checkpoint_id = %s"
            args += (checkpoint_id,)
        else:
            where += _HEAD  # the fence's head: a stale worker's checkpoint never wins
        with self._cursor() as cur:
            cur.execute(_SELECT_SQL + where, args)
            value = cur.fetchone()
        if value is None:
            return None
        # As PostgresSaver.get_tuple does with its second query.
        if (
            value["checkpoint"]["v"] < 4
            and value["parent_checkpoint_id"]
            and value["pending_sends"]
        ):
            if value["channel_values"] is None:
                value["channel_values"] = []
            self._migrate_pending_sends(
                value["pending_sends"], value["checkpoint"], value["channel_values"]
            )
        return self._load_checkpoint_tuple(value)

    @contextmanager
    def _cursor(self, *, pipeline: bool = False) -> Iterator[Any]:
        if self.pipe is not None or not isinstance(self.conn, ConnectionPool):
            # One shared connection: PostgresSaver's lock is what makes it safe.
            with super()._cursor(pipeline=pipeline) as cur:
                yield cur
            return
        # A pool lends each call its own connection; as PostgresSaver._cursor, less the lock.
        with self.conn.connection() as conn:
            if pipeline and self.supports_pipeline:
                with conn.pipeline(), conn.cursor(binary=True, row_factory=dict_row) as cur:
                    yield cur
            elif pipeline:
                with conn.transaction(), conn.cursor(binary=True, row_factory=dict_row) as cur:
                    yield cur
            else:
                with conn.cursor(binary=True, row_factory=dict_row) as cur:
                    yield cur
