"""The sweep: reminders, escalations and expiries that are due, plus notification retries.

Runs every minute (django-q2 Schedule, migration 0005) and once with ``manage.py sweep``. Each
step selects only due rows through an index on (status, due time) with a bound, so its query
count depends on how many are due, never on how many approvals are pending.
"""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.utils import timezone

from approvals import contract, notifications, policy
from approvals.contract import TIMEOUT_ACTOR
from approvals.models import ApprovalRequest, Notification, RiskTier
from approvals.notifications import notifications_create
from approvals.services.decisions import approval_close
from approvals.services.runs import run_advance_enqueue
from audit.services import event_record

# Rows handled per step and sweep; the next sweep continues with the rest.
BATCH = 200
SWEEP_ACTOR = "system:sweep"


def approvals_sweep(*, now: dt.datetime | None = None) -> dict[str, int]:
    """One pass: expire, escalate, remind (in that order), then retry due notifications."""
    now = now or timezone.now()
    expired = sum(approval_expire(approval_id=pk, now=now) for pk in _due("expires_at", now))
    escalated = sum(approval_escalate(approval_id=pk, now=now) for pk in _due("escalate_at", now))
    reminded = sum(approval_remind(approval_id=pk, now=now) for pk in _due("remind_at", now))
    retried = 0
    for pk in notifications.notifications_due(now=now, limit=BATCH):
        notifications.notification_deliver_later(notification_id=pk)
        retried += 1
    return {"expired": expired, "escalated": escalated, "reminded": reminded, "retried": retried}


def _due(field: str, now: dt.datetime) -> list[int]:
    return list(
        ApprovalRequest.objects.filter(
            status=ApprovalRequest.Status.PENDING, **{f"{field}__lte": now}
        )
        .order_by(field, "id")
        .values_list("id", flat=True)[:BATCH]
    )


def _lock_if_due(*, approval_id: int, field: str, now: dt.datetime) -> ApprovalRequest | None:
    """Lock the approval if it is still pending and ``field`` is due; the decide path takes
    the same row lock, so each outcome is claimed once."""
    return (
        ApprovalRequest.objects.select_for_update()
        .select_related("run", "run__requested_by")
        .filter(pk=approval_id, status=ApprovalRequest.Status.PENDING, **{f"{field}__lte": now})
        .first()
    )


def approval_expire(*, approval_id: int, now: dt.datetime | None = None) -> bool:
    """Apply the tier's default decision as system:timeout; False if it was decided first.

    The claim is the same row lock the decision takes, so a decision racing this ends in
    exactly one outcome.
    """
    now = now or timezone.now()
    with transaction.atomic():
        locked = _lock_if_due(approval_id=approval_id, field="expires_at", now=now)
        if locked is None:
            return False
        tier = policy.tier_get(locked.tier)
        default = tier.expiry_decision if tier else RiskTier.ExpiryDecision.REJECT
        value = contract.decision_value(
            decision=default,
            args=locked.args,
            message="expired",
            by=TIMEOUT_ACTOR,
            approval_id=locked.id,
            tier=locked.tier,
            policy_version=locked.policy_version,
            decided_at=now,
        )
        # A default of approve must pass the ledger's check, so it is stored as approved.
        approval_close(
            approval=locked,
            status=(
                ApprovalRequest.Status.APPROVED
                if default == RiskTier.ExpiryDecision.APPROVE
                else ApprovalRequest.Status.EXPIRED
            ),
            decided_by=None,
            label=TIMEOUT_ACTOR,
            value=value,
            now=now,
        )
        event_record(
            action="approval.expired",
            actor=TIMEOUT_ACTOR,
            run_id=locked.run_id,
            approval_id=locked.id,
            tool=locked.tool,
            data={
                "default_decision": default,
                "expires_at": locked.expires_at.isoformat(),
                "policy_version": locked.policy_version,
            },
        )
        notifications_create(
            approval=locked,
            event=Notification.Event.EXPIRY,
            tier=tier,
            detail=f"Nobody decided in time; {TIMEOUT_ACTOR} applied {default}.",
        )
        run_advance_enqueue(run_id=locked.run_id)
    return True


def approval_remind(*, approval_id: int, now: dt.datetime | None = None) -> bool:
    """Remind the approvers once, if the approval is still pending and the reminder is due."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = _lock_if_due(approval_id=approval_id, field="remind_at", now=now)
        if locked is None:
            return False
        locked.remind_at = None
        locked.reminded_at = now
        locked.save(update_fields=["remind_at", "reminded_at"])
        event_record(
            action="approval.reminded",
            actor=SWEEP_ACTOR,
            run_id=locked.run_id,
            approval_id=locked.id,
            tool=locked.tool,
            data={"expires_at": locked.expires_at.isoformat()},
        )
        notifications_create(
            approval=locked,
            event=Notification.Event.REMINDER,
            tier=policy.tier_get(locked.tier),
            detail=f"It expires at {locked.expires_at:%Y-%m-%d %H:%M} UTC.",
        )
    return True


def approval_escalate(*, approval_id: int, now: dt.datetime | None = None) -> bool:
    """Widen who may decide to the tier's escalation group and notify that group, once."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = _lock_if_due(approval_id=approval_id, field="escalate_at", now=now)
        if locked is None:
            return False
        tier = policy.tier_get(locked.tier)
        locked.escalate_at = None
        locked.escalated_at = now
        locked.save(update_fields=["escalate_at", "escalated_at"])
        group = tier.escalation_group.name if tier and tier.escalation_group_id else ""
        event_record(
            action="approval.escalated",
            actor=SWEEP_ACTOR,
            run_id=locked.run_id,
            approval_id=locked.id,
            tool=locked.tool,
            data={"escalation_group": group, "expires_at": locked.expires_at.isoformat()},
        )
        notifications_create(
            approval=locked,
            event=Notification.Event.ESCALATION,
            tier=tier,
            detail=f"Nobody decided yet; members of {group or 'the escalation group'} may now.",
        )
    return True
