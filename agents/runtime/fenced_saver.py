"""Checkpoint writes fenced by the run lease (invariant 6; docs/guarantees.md, "One worker").

Every advance takes the run's lease with a new, larger ``lease_epoch`` and streams with that
epoch in its config; LangGraph copies primitive configurable values into each checkpoint's
metadata, so every checkpoint records the epoch of the lease it was written under. Two rules
keep a worker that lost its lease from moving the thread:

- **Writer.** ``put`` and ``put_writes`` first ask the advance's guard (its heartbeat) whether
  the lease is certainly still held: not lost, and not past the expiry it last wrote, less a
  margin for clock skew. A worker that cannot be sure writes nothing and stops (``LeaseLost``).
- **Reader.** The head of a thread (in each checkpoint namespace) is the newest checkpoint of
  the highest epoch, and the thread's history is the head's lineage (plus any branch of the
  head's own epoch, which no stale worker can write: each lease takes a larger epoch). A
  checkpoint that a stale worker still wrote (paused between the check and the write) is
  ignored once the new owner has written one of its own. Before that it is a successor of a
  state on the lineage whose effects each passed the ledger's lease fence, so continuing from
  it is the same as the old worker having written it a moment sooner.

Writes without an epoch (a fork's first checkpoint, written outside any advance) count as 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from agents.runtime.at_rest import SealedPostgres, SealedSqlite

EPOCH = "lease_epoch"  # the configurable key, and so the metadata key
GUARD = "lease_guard"  # an object with ``assert_held()``, set by the advance


class _LeaseFence:
    """The rules above over a saver; the subclasses say how to read (epoch, id, parent)."""

    def _thread_rows(self, thread_id: str, ns: str) -> list[tuple[int, str, str | None]]:
        raise NotImplementedError

    def _head_id(self, thread_id: str, ns: str) -> str | None:
        raise NotImplementedError

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        _assert_held(config)
        return super().put(config, checkpoint, metadata, new_versions)  # type: ignore[misc]

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        _assert_held(config)
        super().put_writes(config, writes, task_id, task_path)  # type: ignore[misc]

    def get_tuple(self, config: Any) -> Any:
        conf = config["configurable"]
        if conf.get("checkpoint_id"):
            return super().get_tuple(config)  # type: ignore[misc]
        ns = conf.get("checkpoint_ns", "")
        head = self._head_id(str(conf["thread_id"]), ns)
        if head is None:
            return None
        # With the id given, SqliteSaver returns the config it was given as the tuple's own:
        # it must be complete, or update_state's writes on it miss the namespace (KeyError).
        return super().get_tuple(  # type: ignore[misc]
            {**config, "configurable": {**conf, "checkpoint_ns": ns, "checkpoint_id": head}}
        )

    def list(
        self,
        config: Any,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 - the saver's own signature
        before: Any = None,
        limit: int | None = None,
    ) -> Iterator[Any]:
        conf = (config or {}).get("configurable") or {}
        if "thread_id" not in conf or conf.get("checkpoint_id"):
            yield from super().list(config, filter=filter, before=before, limit=limit)  # type: ignore[misc]
            return
        ns = conf.get("checkpoint_ns", "")
        hidden = stale_ids(self._thread_rows(str(conf["thread_id"]), ns))
        shown = 0
        for tup in super().list(config, filter=filter, before=before, limit=None):  # type: ignore[misc]
            tconf = tup.config["configurable"]
            if tconf.get("checkpoint_ns", "") == ns and tconf["checkpoint_id"] in hidden:
                continue  # a stale worker's branch
            yield tup
            shown += 1
            if limit is not None and shown >= limit:
                return


def head_lineage(rows: list[tuple[int, str, str | None]]) -> set[str]:
    """Ids from the head (newest of the highest epoch) back to the first checkpoint."""
    if not rows:
        return set()
    parents = {checkpoint_id: parent for _, checkpoint_id, parent in rows}
    _, at, _ = max(rows, key=lambda row: (row[0], row[1]))
    lineage: set[str] = set()
    while at is not None and at not in lineage:
        lineage.add(at)
        at = parents.get(at)
    return lineage


def stale_ids(rows: list[tuple[int, str, str | None]]) -> set[str]:
    """Checkpoints off the head's lineage written under an older epoch than the head's: what
    workers that had lost the lease wrote. A branch of the head's own epoch was written by
    the lease holder itself or, at epoch 0, outside any advance (``update_state``, a fork's
    first checkpoint): it is listed, as PostgresSaver lists it."""
    if not rows:
        return set()
    lineage = head_lineage(rows)
    top = max(epoch for epoch, _, _ in rows)
    return {cid for epoch, cid, _ in rows if cid not in lineage and epoch < top}


def _assert_held(config: Any) -> None:
    guard = ((config or {}).get("configurable") or {}).get(GUARD)
    if guard is not None:
        guard.assert_held()


_PG_EPOCH = f"COALESCE((metadata->>'{EPOCH}')::bigint, 0)"
_SQLITE_EPOCH = f"COALESCE(CAST(json_extract(CAST(metadata AS TEXT), '$.{EPOCH}') AS INTEGER), 0)"


class FencedPostgresSaver(_LeaseFence, SealedPostgres, PostgresSaver):
    """PostgresSaver with the lease fence, encrypted at rest (``runtime.at_rest``)."""

    def _thread_rows(self, thread_id: str, ns: str) -> list[tuple[int, str, str | None]]:
        with self._cursor() as cur:
            cur.execute(
                f"SELECT {_PG_EPOCH} AS epoch, checkpoint_id, parent_checkpoint_id FROM checkpoints"
                " WHERE thread_id = %s AND checkpoint_ns = %s",
                (thread_id, ns),
            )
            return [(r["epoch"], r["checkpoint_id"], r["parent_checkpoint_id"]) for r in cur]

    def _head_id(self, thread_id: str, ns: str) -> str | None:
        with self._cursor() as cur:
            cur.execute(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s"
                f" ORDER BY {_PG_EPOCH} DESC, checkpoint_id DESC LIMIT 1",
                (thread_id, ns),
            )
            row = cur.fetchone()
        return row["checkpoint_id"] if row else None


class FencedSqliteSaver(_LeaseFence, SealedSqlite, SqliteSaver):
    """SqliteSaver with the lease fence, encrypted at rest (``runtime.at_rest``)."""

    def _thread_rows(self, thread_id: str, ns: str) -> list[tuple[int, str, str | None]]:
        with self.cursor(transaction=False) as cur:
            cur.execute(
                f"SELECT {_SQLITE_EPOCH}, checkpoint_id, parent_checkpoint_id FROM checkpoints"
                " WHERE thread_id = ? AND checkpoint_ns = ?",
                (thread_id, ns),
            )
            return [(int(e), c, p) for e, c, p in cur.fetchall()]

    def _head_id(self, thread_id: str, ns: str) -> str | None:
        with self.cursor(transaction=False) as cur:
            cur.execute(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?"
                f" ORDER BY {_SQLITE_EPOCH} DESC, checkpoint_id DESC LIMIT 1",
                (thread_id, ns),
            )
            row = cur.fetchone()
        return row[0] if row else None
