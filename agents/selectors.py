"""Reads that need the checkpointer (the state of a run's thread)."""

from __future__ import annotations

from typing import Any

from agents.registry import agent_get, agent_is_registered
from approvals.models import AgentRun


def run_pending_interrupt_ids(*, run: AgentRun) -> list[str]:
    """Ids of the interrupts the run's thread is paused on."""
    from agents.runner import _checkpoint_version, graph_for, thread_config

    version = _checkpoint_version(run) or run.graph_version
    if not agent_is_registered(run.agent, version):
        return []
    graph = graph_for(agent_get(run.agent, version))
    return [intr.id for intr in graph.get_state(thread_config(run)).interrupts]


def runs_orphan_interrupts(*, runs: Any = None) -> dict[str, list[str]]:
    """{run id: interrupt ids with no ApprovalRequest} - must always be empty."""
    runs = runs if runs is not None else AgentRun.objects.all()
    orphans: dict[str, list[str]] = {}
    for run in runs:
        pending = run_pending_interrupt_ids(run=run)
        known = set(run.approvals.values_list("interrupt_id", flat=True))
        missing = [interrupt_id for interrupt_id in pending if interrupt_id not in known]
        if missing:
            orphans[str(run.pk)] = missing
    return orphans


def run_interrupts_without_approval(*, run: AgentRun) -> list[str]:
    """Interrupt ids anywhere in the run's checkpoint history that no ApprovalRequest answers."""
    from agents.runner import run_history

    seen = {iid for step in run_history(run=run) for iid in step["interrupt_ids"]}
    known = set(run.approvals.values_list("interrupt_id", flat=True))
    return sorted(seen - known)
