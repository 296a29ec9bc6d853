"""Undo of a call that ran without waiting (docs/autonomy.md): compensation through the
ledger, exactly once, and the link from an autonomous action to the effects it ran.

An autonomous call's effects run with ``approval_id=None`` under the action's idempotency key:
the effect keyed exactly so, or the saga steps keyed ``<key>:<step>``.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db.models import Q, QuerySet

from agents.effects.compensation import effect_compensate
from agents.effects.errors import LedgerError, ToolError
from agents.effects.reconcile import UNSETTLED, effect_escalate, effect_reconcile
from agents.models import Effect
from agents.tools import tool_find
from approvals.autonomy_models import AutonomousAction
from approvals.models import AgentRun
from approvals.services.autonomy_actions import autonomous_action_undo_finish

logger = logging.getLogger(__name__)

# An effect of a run still running may be in flight when its undo is asked: the task waits up
# to half the advance deadline (well below the task timeout) for the call to settle before a
# person is asked.
UNDO_SETTLE_POLL_S = 0.5


def _settle_wait_s() -> float:
    return settings.RUN_ADVANCE_DEADLINE_SECONDS / 2


ACTIVE_RUN = (
    AgentRun.Status.QUEUED,
    AgentRun.Status.RUNNING,
)


def effect_belongs(*, key: str, tool: str, effect_key: str, effect_tool: str) -> bool:
    """Whether the effect under ``effect_key`` is one an action of ``tool`` under ``key`` ran
    (``action_effects``, for rows already read)."""
    if effect_key == key:
        return True
    spec = tool_find(tool)
    steps = spec.saga_steps if spec else ()
    return effect_key.startswith(f"{key}:") and effect_tool in steps


def action_effects(*, key: str, tool: str) -> QuerySet[Effect]:
    """The effects an autonomous action of ``tool`` ran (not their compensations), newest
    first: the one under its key, or its saga's steps (``<key>:<step>``)."""
    spec = tool_find(tool)
    steps = Q(key__startswith=f"{key}:", tool__in=spec.saga_steps) if spec else Q(pk__in=[])
    return Effect.objects.filter(Q(key=key) | steps, compensates__isnull=True).order_by(
        "-created_at", "-id"
    )


def _settle_in_flight(action: AutonomousAction) -> list[str]:
    """Settle the action's effects whose outcome is unknown by asking the downstream by key
    (never by calling it: an undo never performs a first call). Returns the keys still in
    doubt, after escalating them to a person."""
    deadline = time.monotonic() + _settle_wait_s()
    while True:
        waiting: list[Effect] = []
        for effect in action_effects(key=action.key, tool=action.tool).filter(status__in=UNSETTLED):
            if effect_reconcile(effect) in ("unknown", "not_yet"):
                waiting.append(effect)
        if not waiting:
            return []
        running = AgentRun.objects.filter(pk=action.run_id, status__in=ACTIVE_RUN).exists()
        if not running or time.monotonic() >= deadline:
            for effect in waiting:
                effect_escalate(effect, reason="in doubt when its undo was asked: did it happen?")
            return [effect.key for effect in waiting]
        time.sleep(UNDO_SETTLE_POLL_S)


def autonomous_action_compensate(*, action_id: int) -> str:
    """Undo an action a reviewer marked ``undoing``: compensate every succeeded effect of it,
    newest first, each exactly once (ledger key ``<effect key>:compensate``), then close the
    undo (``undone``, or ``undo_failed`` for a person to settle). Safe to repeat: a second
    delivery finds each compensation in the ledger and calls nothing twice."""
    action = AutonomousAction.objects.filter(pk=action_id).first()
    if action is None or action.review != AutonomousAction.Review.UNDOING:
        return "not undoing"
    if AgentRun.objects.filter(pk=action.run_id, erased_at__isnull=False).exists():
        # Its effects' args are gone (erasure): nothing can build a compensation. A person.
        autonomous_action_undo_finish(
            action_id=action.pk, ok=False, detail={"reason": "the run's data was erased"}
        )
        return "undo_failed"
    failed = _settle_in_flight(action)
    compensations: list[str] = []
    not_reversible: list[str] = []
    for effect in action_effects(key=action.key, tool=action.tool).filter(
        status__in=(Effect.Status.SUCCEEDED, Effect.Status.COMPENSATED)
    ):
        spec = tool_find(effect.tool)
        if spec is not None and not spec.compensate_with:
            not_reversible.append(effect.key)  # a saga's e-mail: nothing can take it back
            continue
        try:
            compensation = effect_compensate(effect=effect)
        except (ToolError, LedgerError) as exc:
            # The type only: the message may quote the run's data (the effect holds it, sealed).
            logger.warning("undo of %s failed: %s", effect.key, type(exc).__name__)
            failed.append(effect.key)
            continue
        if compensation is None:
            failed.append(effect.key)
        else:
            compensations.append(compensation.key)
    ok = not failed
    # Nothing had run yet: the ledger refuses its effect from now on (agents/effects/undone.py),
    # so the undo prevented it rather than reversed it.
    prevented = not action_effects(key=action.key, tool=action.tool).exists()
    autonomous_action_undo_finish(
        action_id=action.pk,
        ok=ok,
        detail={
            "compensations": compensations,
            "failed": failed,
            "not_reversible": not_reversible,
            **({"prevented": True} if prevented else {}),
        },
    )
    return "undone" if ok else "undo_failed"
