"""Settling effects whose outcome is unknown (invariant 13): ask the downstream by key.

A timeout leaves an effect ``in_doubt``; a worker killed mid-call leaves it ``claimed``. Neither
is assumed done or failed: the tool's ``lookup`` asks the downstream what happened under the
key (as payment providers let you), and the row is settled as succeeded (with the downstream's
result) or failed (it never acted). A tool without a lookup cannot be settled by the console: the
effect is escalated to a person, once.

Runs before a replay calls again (``ledger``), before compensation, and on the sweep.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any, Literal

from django.conf import settings
from django.utils import timezone

from agents.effects.rows import effect_mark
from agents.models import Effect
from agents.tools import ToolSpec, tool_find
from approvals.models import AgentRun
from approvals.services import run_advance_enqueue

logger = logging.getLogger(__name__)

ACTOR = "system:reconcile"
UNSETTLED = (Effect.Status.CLAIMED, Effect.Status.IN_DOUBT)
# Effects settled per sweep pass; the next pass continues.
BATCH = 200

Outcome = Literal["succeeded", "not_done", "not_yet", "unknown"]


def effect_reconcile(effect: Effect, spec: ToolSpec | None = None) -> Outcome:
    """Ask the downstream about an unsettled effect and settle what can be settled.

    ``succeeded``: it acted; the stored result is the downstream's. ``not_done``: it has no
    record and no call can still land (EFFECT_SETTLE_AFTER_SECONDS after the last attempt):
    failed, it never acted. ``not_yet``: no record, but a timed-out call may still land: left
    as it is. ``unknown``: no lookup, or the lookup failed: left as it is.
    """
    spec = spec or tool_find(effect.tool)
    if spec is None or spec.lookup is None:
        return "unknown"
    try:
        found = spec.lookup(effect.key)
    except Exception:  # noqa: BLE001 - the downstream is down: try again on the next pass
        logger.warning("lookup of %s failed; it stays %s", effect.key, effect.status, exc_info=True)
        return "unknown"
    if found is not None:
        if _settle(effect, status=Effect.Status.SUCCEEDED, fields={"result": found}, found=True):
            _compensate_if_cancelled(effect)
        return "succeeded"
    quiet_since = timezone.now() - dt.timedelta(seconds=settings.EFFECT_SETTLE_AFTER_SECONDS)
    if effect.updated_at > quiet_since:
        return "not_yet"
    _settle(
        effect,
        status=Effect.Status.FAILED,
        fields={"error": "the downstream has no record of this key: it never acted"},
        found=False,
    )
    return "not_done"


def effect_escalate(effect: Effect, *, reason: str) -> bool:
    """Hand an effect nobody can settle automatically to a person, once (audited)."""
    return effect_mark(
        effect,
        where={"escalated_at__isnull": True},
        update={"escalated_at": timezone.now()},
        action="effect.escalated",
        actor=ACTOR,
        data={"args": effect.args, "status": effect.status, "reason": reason},
    )


def effects_reconcile(*, limit: int = BATCH) -> dict[str, int]:
    """The sweep's pass: settle the effects in doubt, escalate those that cannot be."""
    counts = {"succeeded": 0, "not_done": 0, "escalated": 0}
    due = Effect.objects.filter(status=Effect.Status.IN_DOUBT).order_by("updated_at", "id")
    for effect in list(due[:limit]):
        outcome = effect_reconcile(effect)
        if outcome == "unknown":
            reason = "no lookup by key: a person must say whether it happened"
            counts["escalated"] += effect_escalate(effect, reason=reason)
        elif outcome in counts:
            counts[outcome] += 1
    return counts


def _compensate_if_cancelled(effect: Effect) -> None:
    """It happened after all, and its run was cancelled meanwhile: the run's advance undoes it
    (cancel compensates every applied effect)."""
    if AgentRun.objects.filter(pk=effect.run_id, cancel_requested=True).exists():
        run_advance_enqueue(run_id=effect.run_id)


def _settle(effect: Effect, *, status: str, fields: dict[str, Any], found: bool) -> bool:
    moved = effect_mark(
        effect,
        where={"status__in": UNSETTLED},
        update={"status": status, **fields},
        action="effect.reconciled",
        actor=ACTOR,
        data={
            "was": effect.status,
            "now": status,
            "downstream_acted": found,
            **({"result": fields["result"]} if found else {}),
        },
    )
    effect.refresh_from_db()
    return moved
