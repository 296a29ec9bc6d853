"""Writes for calls that ran without waiting (docs/autonomy.md): recording one when
the gate lets it run, and closing its undo once the agents side has compensated it.

Each write records its audit event in the same transaction (invariant 3).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from approvals.autonomy import Verdict
from approvals.autonomy_models import AutonomousAction
from audit.canonical import canonical_hash
from audit.services import event_record


def autonomous_action_record(
    *,
    run_id: Any,
    key: str,
    tool: str,
    tier: str,
    args: dict[str, Any],
    payload: dict[str, Any],
    verdict: Verdict,
) -> AutonomousAction:
    """Record a call the rule lets run without waiting (one row per idempotency key).

    A node re-run or a replay under the same key finds the row and records nothing again.
    """
    review = (
        AutonomousAction.Review.PENDING if verdict.sampled else AutonomousAction.Review.NOT_SAMPLED
    )
    rule = verdict.rule
    percent = 100 if verdict.mode == "post_hoc" else (rule.sample_percent if rule else 100)
    with transaction.atomic():
        action, created = AutonomousAction.objects.get_or_create(
            key=key,
            defaults={
                "run_id": run_id,
                "tool": tool,
                "tier": tier,
                "args": args,
                "payload": payload,
                "payload_hash": canonical_hash(payload),
                "mode": verdict.mode,
                "rule": rule,
                "sample_percent": percent,
                "draw": verdict.draw,
                "confidence": verdict.confidence,
                "review": review,
            },
        )
        if created:
            event_record(
                action="autonomy.ran",
                actor=f"policy:{verdict.mode}",
                run_id=run_id,
                tool=tool,
                data={
                    "action_id": action.pk,
                    "key": key,
                    "tier": tier,
                    "mode": verdict.mode,
                    "draw": verdict.draw,
                    "sample_percent": percent,
                    "sampled": verdict.sampled,
                    "confidence": None if verdict.confidence is None else str(verdict.confidence),
                    "rule_id": rule.pk if rule else None,
                    "payload_hash": action.payload_hash,
                },
                private={"payload": payload},
            )
    return action


def autonomous_action_undo_finish(
    *, action_id: int, ok: bool, detail: dict[str, Any]
) -> AutonomousAction | None:
    """Close an undo: ``undoing`` -> ``undone`` (every effect compensated) or ``undo_failed``
    (a person settles what is left). A conditional update: a second delivery changes nothing
    and returns None."""
    target = AutonomousAction.Review.UNDONE if ok else AutonomousAction.Review.UNDO_FAILED
    with transaction.atomic():
        moved = AutonomousAction.objects.filter(
            pk=action_id, review=AutonomousAction.Review.UNDOING
        ).update(review=target)
        if not moved:
            return None
        action = AutonomousAction.objects.get(pk=action_id)
        event_record(
            action="autonomy.undone" if ok else "autonomy.undo_failed",
            actor="system:undo",
            run_id=action.run_id,
            tool=action.tool,
            data={
                "action_id": action.pk,
                "key": action.key,
                **detail,
            },
        )
    return action
