"""django-q2 tasks. Each fetches by id and calls one service, with one data-key cache for the
task (core.sealing.scoped: an erasure elsewhere is seen by the next task)."""

from __future__ import annotations

import logging

from django.db import close_old_connections

from agents import autonomy_undo, erasure
from agents.effects import reconcile
from agents.remote import connector
from agents.runtime import advance, recovery, retention
from core.sealing import scoped

log = logging.getLogger(__name__)


@scoped
def run_advance(run_id: str) -> str:
    close_old_connections()
    outcome = advance.run_advance(run_id=run_id)
    log.info("run %s: %s", run_id, outcome)
    return outcome


@scoped
def runs_recover() -> int:
    """Every minute (Schedule): settle effects in doubt by asking the downstream by key (or
    escalate them), complete erasures a crash interrupted, then re-enqueue runs whose worker
    died. Returns the runs re-enqueued."""
    settled = reconcile.effects_reconcile()
    if any(settled.values()):
        log.info("effects reconciled: %s", settled)
    completed = erasure.erasures_resume()  # a crash between an erasure's two steps
    if completed:
        log.info("erasures completed: %s", completed)
    return recovery.runs_recover()


@scoped
def checkpoints_prune() -> dict[str, int]:
    """Every minute (Schedule): one bounded retention pass over finished runs' checkpoints."""
    close_old_connections()
    summary = retention.checkpoints_prune_pass().summary()
    if summary["runs"] or summary["kept"]:
        log.info("checkpoints pruned: %s", summary)
    return summary


@scoped
def connectors_poll() -> dict[str, dict[str, int]]:
    """Every minute (Schedule): one bounded pass over each active Agent Server connector: open
    requests for its interrupted threads, resume the decided ones. Never raises (errors are
    kept on each connector)."""
    close_old_connections()
    summary = connector.connectors_poll()
    if any(any(counts.values()) for counts in summary.values()):
        log.info("agent server connectors: %s", summary)
    return summary


@scoped
def autonomous_action_undo(action_id: int) -> str:
    """Undo a call that ran without waiting (enqueued on commit after a reviewer set it to
    undoing): compensate its effects through the ledger, exactly once, and close the undo.
    Safe to deliver twice (a worker killed mid-compensation)."""
    close_old_connections()
    outcome = autonomy_undo.autonomous_action_compensate(action_id=action_id)
    log.info("autonomous action %s: %s", action_id, outcome)
    return outcome
