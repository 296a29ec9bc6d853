"""Compensation (sagas): undo a succeeded effect with its tool's compensating tool, exactly once.

A compensation is an effect of its own (key ``<key>:compensate``) that runs through the ledger.
"""

from __future__ import annotations

import logging

from agents.effects.errors import CompensationFailed, LedgerError, ToolError
from agents.effects.ledger import ACTOR, _execute
from agents.effects.reconcile import UNSETTLED, effect_escalate, effect_reconcile
from agents.effects.rows import effect_mark
from agents.models import Effect
from agents.tools import tool_find
from approvals.models import AgentRun

logger = logging.getLogger(__name__)


def effect_compensate(*, effect: Effect) -> Effect | None:
    """Undo a succeeded effect with its tool's compensating tool, exactly once.

    Returns the compensation effect, or None when the tool has no compensation or the
    effect never succeeded.
    """
    spec = tool_find(effect.tool)
    if spec is None:
        raise ToolError(f"tool {effect.tool!r} is not registered in this process")
    if not spec.compensate_with:
        return None
    effect.refresh_from_db()
    if effect.status not in (Effect.Status.SUCCEEDED, Effect.Status.COMPENSATED):
        return None
    comp_args = (
        spec.compensation_args(effect.args, effect.result)
        if spec.compensation_args
        else dict(effect.args)
    )
    comp_key = f"{effect.key}:compensate"
    _execute(
        run_id=str(effect.run_id),
        key=comp_key,
        tool=spec.compensate_with,
        args=comp_args,
        approval_id=None,
        approved_args=comp_args,
        compensates=effect,
    )
    compensation = Effect.objects.get(key=comp_key)
    effect_mark(
        effect,
        where={"status": Effect.Status.SUCCEEDED},
        update={"status": Effect.Status.COMPENSATED},
        action="effect.compensated",
        actor=ACTOR,
        data={
            "compensation_key": comp_key,
            "compensation_tool": spec.compensate_with,
        },
        private={"args": comp_args, "result": compensation.result},
    )
    effect.refresh_from_db()
    return compensation


def run_compensate(*, run_id: str) -> list[Effect]:
    """Compensate every succeeded, not yet compensated effect of the run, newest first.

    One compensation failing does not stop the others; ``CompensationFailed`` then lists the
    keys left as they were (each failure is also an "effect.failed" audit event).
    """
    if AgentRun.objects.filter(pk=run_id, erased_at__isnull=False).exists():
        return []  # erased: its effects' args are gone, and nothing acts for it again
    done: list[Effect] = []
    failed: list[str] = []
    # An effect whose call may have reached the downstream (a worker killed mid-call, a
    # timeout) is settled by asking the downstream by key, never by calling it: compensation
    # never performs a first call. What nobody can settle goes to a person.
    unsettled = Effect.objects.filter(
        run_id=run_id, status__in=UNSETTLED, compensates__isnull=True
    ).order_by("created_at", "id")
    for effect in list(unsettled):
        if effect_reconcile(effect) in ("unknown", "not_yet"):
            # Not found may still mean "in flight": never concluded while a call could land.
            effect_escalate(effect, reason="in doubt when the run was cancelled: did it happen?")
            failed.append(effect.key)
    effects = Effect.objects.filter(
        run_id=run_id, status=Effect.Status.SUCCEEDED, compensates__isnull=True
    ).order_by("-created_at", "-id")
    for effect in list(effects):
        try:
            compensation = effect_compensate(effect=effect)
        except (ToolError, LedgerError) as exc:  # an undo in doubt waits for its settlement
            # The type only: the message may quote the run's data (the effect holds it, sealed).
            logger.warning("compensation of %s failed: %s", effect.key, type(exc).__name__)
            failed.append(effect.key)
            continue
        if compensation is not None:
            done.append(compensation)
    if failed:
        raise CompensationFailed(
            f"could not compensate {', '.join(failed)}", compensated=done, failed=failed
        )
    return done
