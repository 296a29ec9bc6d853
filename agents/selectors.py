"""Reads of a run's thread (its checkpoint history, the state at one step, whether retention
pruned it: agents/runtime/retention.py) and of the ledger."""

from __future__ import annotations

from typing import Any

from agents.autonomy_undo import effect_belongs
from agents.models import Effect
from agents.retention_models import PrunedRun
from agents.runtime.checkpoint import jsonable, thread_config
from agents.runtime.versions import graph_of_run
from approvals.autonomy_models import AutonomousAction
from approvals.contract import is_external_agent
from approvals.models import AgentRun


class CheckpointPruned(LookupError):
    """The step asked for was removed by checkpoint retention."""

    def __init__(self, pruned: PrunedRun) -> None:
        self.pruned = pruned
        super().__init__(retention_notice(pruned))


class CheckpointErased(LookupError):
    """The run's personal data was erased: its steps are gone (agents/erasure.py)."""

    def __init__(self, run: AgentRun) -> None:
        self.run = run
        super().__init__(
            f"This run's personal data was erased on {run.erased_at:%Y-%m-%d %H:%M} UTC: its "
            "steps can no longer be viewed or forked."
        )


def run_pruned(*, run: AgentRun) -> PrunedRun | None:
    """The retention record of a run whose checkpoints were pruned or deleted, else None."""
    pruned = PrunedRun.objects.filter(run_id=run.pk).first()
    if pruned is None or pruned.outcome == PrunedRun.Outcome.KEPT:
        return None
    return pruned


def retention_notice(pruned: PrunedRun) -> str:
    """What a reader is told about a pruned run's missing steps."""
    when = f"{pruned.pruned_at:%Y-%m-%d %H:%M} UTC"
    if pruned.outcome == PrunedRun.Outcome.DELETE:
        return (
            f"This run's checkpoints were deleted by retention on {when}: its steps can no "
            "longer be viewed or forked. Its output and the audit trail remain."
        )
    return (
        f"This run's checkpoints were pruned by retention on {when}: only its final state "
        "is kept, so earlier steps can no longer be viewed or forked. The audit trail remains."
    )


def run_history(*, run: AgentRun) -> list[dict[str, Any]]:
    """The run's checkpoints, oldest first: node that ran, time, next nodes, values, changes,
    and whether a fork may start there (not after an answered pause; never once pruned, since
    the pauses answered before the kept step are gone)."""
    if run.erased_at is not None:
        return []  # its checkpoints are deleted (or about to be): nothing of them is shown
    if is_external_agent(run.agent):
        return []  # it runs in its own service: its checkpoints are not ours
    pruned = run_pruned(run=run) is not None
    graph = graph_of_run(run)
    snapshots = list(graph.get_state_history(thread_config(run)))
    snapshots.reverse()
    steps: list[dict[str, Any]] = []
    previous: Any = None
    answered = False  # a pause before this step was answered: its state holds a decision
    for snap in snapshots:
        values = jsonable(dict(snap.values or {}))
        before = jsonable(dict(previous.values or {})) if previous is not None else {}
        changed = {key: value for key, value in values.items() if before.get(key) != value}
        steps.append(
            {
                "checkpoint_id": snap.config["configurable"]["checkpoint_id"],
                "step": (snap.metadata or {}).get("step"),
                "source": (snap.metadata or {}).get("source"),
                "nodes": list(previous.next) if previous is not None else ["input"],
                "created_at": snap.created_at,
                "next": list(snap.next),
                "values": values,
                "changed": changed,
                "interrupts": [jsonable(i.value) for i in getattr(snap, "interrupts", ()) or ()],
                "interrupt_ids": [i.id for i in getattr(snap, "interrupts", ()) or ()],
                "forkable": not answered and not pruned,
            }
        )
        answered = answered or bool(steps[-1]["interrupt_ids"])
        previous = snap
    return steps


def run_state_at(*, run: AgentRun, checkpoint_id: str) -> dict[str, Any]:
    """One step of the history; CheckpointPruned when retention removed it, LookupError when
    the checkpoint is not this run's, CheckpointErased once the run was erased."""
    if run.erased_at is not None:
        raise CheckpointErased(run)
    for step in run_history(run=run):
        if step["checkpoint_id"] == checkpoint_id:
            return step
    pruned = run_pruned(run=run)
    if pruned is not None:
        raise CheckpointPruned(pruned)
    raise LookupError(f"checkpoint {checkpoint_id} is not part of run {run.pk}")


def run_interrupts_without_approval(*, run: AgentRun) -> list[str]:
    """Interrupt ids anywhere in the run's checkpoint history that no ApprovalRequest answers."""
    seen = {iid for step in run_history(run=run) for iid in step["interrupt_ids"]}
    known = set(run.approvals.values_list("interrupt_id", flat=True))
    return sorted(seen - known)


def effects_in_doubt_count() -> int:
    """Effects nobody knows happened (invariant 13): settled by reconciliation or a person.
    Read through the partial index effect_unsettled_due (claimed or in doubt)."""
    return Effect.objects.filter(status=Effect.Status.IN_DOUBT).count()


def run_autonomous_actions(*, run: AgentRun, effects: list[Effect]) -> list[dict[str, Any]]:
    """The run's calls that ran without waiting, each with its effects and their compensation
    (``effects``: the run's effects as the page already read them; one query more)."""
    actions = list(
        AutonomousAction.objects.filter(run=run).select_related("reviewed_by").order_by("id")
    )
    compensation = {e.compensates_id: e for e in effects if e.compensates_id}
    rows = []
    for action in actions:
        own = [
            {"effect": e, "compensation": compensation.get(e.pk)}
            for e in effects
            if not e.compensates_id
            and effect_belongs(
                key=action.key, tool=action.tool, effect_key=e.key, effect_tool=e.tool
            )
        ]
        rows.append({"action": action, "effects": own})
    return rows
