"""Retention tests' helpers: a finished note-agent run, and a thread's rows and state as the
checkpoint tables hold them (both databases)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import connection
from django.utils import timezone

from agents.runtime import advance
from agents.runtime.checkpoint import checkpointer_get, thread_config
from agents.runtime.versions import graph_of_run
from agents.services import run_start
from approvals.models import AgentRun
from approvals.services import approval_decide

OLD = dt.timedelta(days=45)  # past the 30-day default


def finished_run(alice, bob, *, topic: str = "disk", age: dt.timedelta = OLD) -> AgentRun:
    """A completed note-agent run (propose, a decided pause, execute), finished ``age`` ago."""
    run = run_start(agent="note_agent", input={"topic": topic}, user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    approval = run.approvals.get()
    approval_decide(
        approval=approval, user=bob, decision="approve", seen_hash=approval.payload_hash
    )
    assert advance.run_advance(run_id=run.id) == "completed"
    AgentRun.objects.filter(pk=run.pk).update(finished_at=timezone.now() - age)
    run.refresh_from_db()
    return run


def checkpoint_rows(run: AgentRun) -> dict[str, int]:
    """The thread's rows in each checkpoint table, counted on the table itself."""
    thread = run.thread_id
    if connection.vendor == "postgresql":
        counts = {}
        with connection.cursor() as cur:
            for key, table in (
                ("checkpoints", "checkpoints"),
                ("writes", "checkpoint_writes"),
                ("blobs", "checkpoint_blobs"),
            ):
                cur.execute(f"SELECT count(*) FROM {table} WHERE thread_id = %s", [thread])
                counts[key] = cur.fetchone()[0]
        return counts
    with checkpointer_get().cursor(transaction=False) as cur:
        counts = {}
        for key, table in (("checkpoints", "checkpoints"), ("writes", "writes")):
            cur.execute(f"SELECT count(*) FROM {table} WHERE thread_id = ?", (thread,))
            counts[key] = cur.fetchone()[0]
        counts["blobs"] = 0  # SQLite keeps channel values inline
        return counts


def thread_state(run: AgentRun) -> Any:
    return graph_of_run(run).get_state(thread_config(run))
