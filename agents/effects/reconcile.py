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
from django.db.models import Q
from django.utils import timezone

from agents.effects.rows import effect_mark
from agents.models import Effect
from agents.tools import ToolSpec, tool_find
from approvals import policy
from approvals.models import AgentRun
from approvals.services import run_advance_enqueue, run_unflag

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
    except Exception as exc:  # noqa: BLE001 - the downstream is down: try again on the next pass
        # The type only, no traceback: the message may quote the run's data.
        logger.warning(
            "lookup of %s failed (%s); it stays %s", effect.key, type(exc).__name__, effect.status
        )
        return "unknown"
    if found is not None:
        _settle(effect, status=Effect.Status.SUCCEEDED, fields={"result": found}, found=True)
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


def effect_tier(effect: Effect) -> str:
    """The highest of the approval's tier and the tier the policy in force puts the call in
    (critical for a tool this process does not know)."""
    spec = tool_find(effect.tool)
    tier = policy.tier_for_call(
        tool=effect.tool,
        args=effect.args,
        default_tier=spec.tier if spec else policy.UNKNOWN_TIER,
    )
    if effect.approval_id and policy.tier_level(effect.approval.tier) > policy.tier_level(tier):
        return effect.approval.tier
    return tier


def effect_escalate(effect: Effect, *, reason: str) -> bool:
    """Hand an effect nobody can settle automatically to a person, once (audited)."""
    tier = effect_tier(effect)
    return effect_mark(
        effect,
        where={"escalated_at__isnull": True},
        update={"escalated_at": timezone.now(), "tier": tier},
        action="effect.escalated",
        actor=ACTOR,
        data={"status": effect.status, "reason": reason, "tier": tier},
        private={"args": effect.args},
    )


def effects_reconcile(*, limit: int = BATCH) -> dict[str, int]:
    """The sweep's pass: settle the effects in doubt, escalate those that cannot be."""
    counts = {"succeeded": 0, "not_done": 0, "escalated": 0}
    # In doubt, or claimed by a worker that died in a run that will never advance again.
    ended = (AgentRun.Status.DEAD, AgentRun.Status.FAILED, AgentRun.Status.COMPLETED)
    # status__in repeats what the Q implies so the planner starts from the partial index
    # effect_unsettled_due (agents 0008) instead of reading every settled effect.
    due = (
        Effect.objects.filter(status__in=UNSETTLED, run__erased_at__isnull=True)
        .filter(
            Q(status=Effect.Status.IN_DOUBT)
            | Q(status=Effect.Status.CLAIMED, run__status__in=ended)
        )
        .order_by("updated_at", "id")
    )
    for effect in list(due[:limit]):
        outcome = effect_reconcile(effect)
        if outcome == "unknown":
            reason = "no lookup by key: a person must say whether it happened"
            counts["escalated"] += effect_escalate(effect, reason=reason)
        elif outcome in counts:
            counts[outcome] += 1
    _tiers_fill(limit=limit)
    return counts


def _tiers_fill(*, limit: int) -> None:
    """Effects escalated before ``Effect.tier`` existed (agents 0007 left it blank): their tier,
    so those who may settle them see their run (approvals.permissions.run_visible_filter)."""
    blank = (
        Effect.objects.filter(escalated_at__isnull=False, tier="")  # index effect_tier_blank
        .select_related("approval")
        .order_by("id")
    )
    for effect in list(blank[:limit]):
        Effect.objects.filter(pk=effect.pk, tier="").update(tier=effect_tier(effect))


def effect_settled_follow_up(
    effect: Effect, *, actor: Any, reason: str, was_escalated: bool, request: Any = None
) -> None:
    """After an effect left doubt. A cancelled run's advance compensates again (it happened
    after all, or its undo needs another try). A run flagged for a person goes on once none
    of its effects waits for one."""
    run = AgentRun.objects.get(pk=effect.run_id)
    if run.cancel_requested:
        run_advance_enqueue(run_id=run.pk)
        return
    if not (was_escalated and run.flag):
        return
    waiting = Effect.objects.filter(
        run_id=run.pk, status__in=UNSETTLED, escalated_at__isnull=False
    ).exclude(pk=effect.pk)
    if not waiting.exists():
        run_unflag(run=run, user=actor, reason=reason, request=request)


def _settle(effect: Effect, *, status: str, fields: dict[str, Any], found: bool) -> bool:
    was_escalated = effect.escalated_at is not None
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
        },
        private={"result": fields["result"]} if found else None,
    )
    effect.refresh_from_db()
    if moved:
        effect_settled_follow_up(
            effect,
            actor=ACTOR,
            reason=f"{effect.key}: the downstream {'has' if found else 'has no'} record of it",
            was_escalated=was_escalated,
        )
    return moved
