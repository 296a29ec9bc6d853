"""Reviewing an action after the fact (docs/autonomy.md): a call that ran without waiting for a
person, because an autonomy rule let it, is marked fine or undone by one reviewer.

The row is locked and must still be pending (one review per action: a second gets 409); the
state change and its audit event share one transaction (invariant 3); an undo enqueues the
agents' compensation task once the review is committed. The task compensates through the
ledger (exactly once) and reports back with ``autonomous_action_undo_finish``.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone
from django_q.tasks import async_task

from approvals import contract
from approvals.autonomy_models import AutonomousAction
from approvals.permissions import user_may_review_action
from approvals.services.decision_checks import erased_refusal
from audit.canonical import json_has_nul
from audit.services import event_record
from core.errors import ApplicationError
from core.sealing import datakey_scope

Review = AutonomousAction.Review
VERDICTS = ("fine", "undo")
NOTE_MAX = 4000


class ReviewError(ApplicationError):
    """A review that was not recorded (400 unless a subclass says otherwise)."""


class ReviewInvalid(ReviewError):
    """Bad input (400); ``errors`` names the fields."""


class ReviewForbidden(ReviewError):
    status_code = 403


class ReviewConflict(ReviewError):
    """Already reviewed, or its run's data erased (409); the body names the current state."""

    status_code = 409

    def __init__(self, message: str, *, reason: str, action: AutonomousAction):
        super().__init__(message, errors={"review": f"is {action.review}, not pending"})
        self.reason = reason
        self.action = action

    def extra(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "review": self.action.review,
            "reviewed_by": self.action.reviewed_by.get_username()
            if self.action.reviewed_by_id
            else None,
            "reviewed_at": self.action.reviewed_at,
        }


def _erased_check(action: AutonomousAction) -> None:
    """Like approval_decide's: nothing of an erased run (or an unreadable row) is reviewed."""
    refusal = erased_refusal(run=action.run, values=(action.args, action.payload), noun="action")
    if refusal:
        raise ReviewConflict(
            refusal[1].replace("decided", "reviewed"), reason=refusal[0], action=action
        )


def _input_check(*, verdict: str, note: str) -> None:
    if verdict not in VERDICTS:
        raise ReviewInvalid(
            "Unknown verdict.", errors={"verdict": f"must be one of {', '.join(VERDICTS)}"}
        )
    if not isinstance(note, str) or json_has_nul(note) or len(note) > NOTE_MAX:
        raise ReviewInvalid(
            "The note is not text the console keeps.",
            errors={"note": f"must be text of at most {NOTE_MAX} characters, without NUL"},
        )


def autonomous_action_review(
    *,
    action: AutonomousAction,
    user: Any,
    verdict: str,
    note: str = "",
    request: Any = None,
) -> AutonomousAction:
    """Mark an action that ran without waiting ``fine``, or ``undo`` it.

    fine: review -> fine, audit "autonomy.reviewed". undo: review -> undoing, audit
    "autonomy.undo_requested", and once committed the agents' task compensates the action's
    effects exactly once (``contract.AUTONOMY_UNDO_TASK``), then sets undone or undo_failed.
    Refused: an erased run (409), someone who may not review the tier or requested the run
    (403), an action no longer pending (409 naming its state).
    """
    _input_check(verdict=verdict, note=note)
    _erased_check(action)
    allowed, reason = user_may_review_action(user=user, tier=action.tier, run=action.run)
    if not allowed:
        raise ReviewForbidden(reason)
    with datakey_scope(), transaction.atomic():
        locked = (
            AutonomousAction.objects.select_for_update(of=("self",))
            .select_related("run", "reviewed_by")
            .get(pk=action.pk)
        )
        _erased_check(locked)
        if locked.review != Review.PENDING:
            by = locked.reviewed_by.get_username() if locked.reviewed_by_id else "nobody"
            raise ReviewConflict(
                f"Not waiting for a review: it is {locked.review} (reviewed by {by}).",
                reason="already_reviewed" if locked.reviewed_by_id else "not_pending",
                action=locked,
            )
        undo = verdict == "undo"
        locked.review = Review.UNDOING if undo else Review.FINE
        locked.reviewed_by = user
        locked.reviewed_at = timezone.now()
        locked.review_note = note
        locked.save(update_fields=["review", "reviewed_by", "reviewed_at", "review_note"])
        event_record(
            action="autonomy.undo_requested" if undo else "autonomy.reviewed",
            actor=user,
            run_id=locked.run_id,
            tool=locked.tool,
            data={
                "autonomous_action_id": locked.pk,
                "key": locked.key,
                "verdict": verdict,
                "tier": locked.tier,
                "mode": locked.mode,
                "payload_hash": locked.payload_hash,
            },
            private={"note": note} if note else None,
            request=request,
        )
        if undo:
            action_id = locked.pk
            transaction.on_commit(
                lambda: async_task(contract.AUTONOMY_UNDO_TASK, action_id, group="autonomy")
            )
    return locked
