"""The final outcome of a decided approval: its status, resume value, audit event and
notification, and the advance of its run on commit."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals import contract
from approvals.diff import args_diff
from approvals.models import ApprovalRequest, Canary, Notification, RiskTier
from approvals.notifications import notifications_create
from approvals.rollups import approval_rollup_add
from approvals.services.canaries import canary_close
from approvals.services.runs import run_advance_enqueue
from approvals.services.shadow import shadow_verdict_settle
from approvals.tracing import approval_wait_record
from audit.canonical import canonical_hash
from audit.services import event_record
from core.prometheus import decision_observe


def approval_close(
    *,
    approval: ApprovalRequest,
    status: str,
    decided_by: Any,
    label: str,
    value: dict[str, Any],
    now: dt.datetime,
    reason: str = "",
) -> Canary | None:
    """Store the final outcome on a locked approval; nothing is due for it afterwards. A
    shadow verdict on it learns whether the person agreed (docs/autonomy.md). A canary's
    (approvals/services/canaries.py) gets its outcome instead of a metrics count: returned,
    else None."""
    approval.status = status
    approval.reject_reason = reason if status == ApprovalRequest.Status.REJECTED else ""
    approval.decided_by = decided_by
    approval.decided_by_label = label
    approval.decided_at = now
    approval.decision = value
    approval.remind_at = None
    approval.escalate_at = None
    approval.save(
        update_fields=[
            "status",
            "decided_by",
            "decided_by_label",
            "decided_at",
            "decision",
            "remind_at",
            "escalate_at",
            "reject_reason",
        ]
    )
    if decided_by is not None:  # a person decided: the shadow verdict learns if they agreed
        shadow_verdict_settle(approval=approval, now=now)
    canary = canary_close(approval=approval, status=status, decided_by=decided_by, now=now)
    if canary is None:
        approval_rollup_add(approval=approval)  # the metrics count it in the same transaction
    return canary


def approval_finalise(
    *,
    approval: ApprovalRequest,
    user: Any,
    decision: str,
    final_args: dict[str, Any],
    voters: list[str],
    messages: list[str],
    required: int,
    tier: RiskTier | None,
    note: str,
    request: Any,
    warned: list[str] | None = None,
    reason: str = "",
) -> None:
    """Status, resume value, audit and notification of a final decision; advance on commit.
    ``warned``: the changes the decider was shown and confirmed (approvals/changes.py);
    ``reason``: a rejection's category (kept on the approval and in the audit)."""
    proposed = approval.proposed_args
    if decision == ApprovalRequest.Decision.APPROVE and canonical_hash(
        final_args
    ) != canonical_hash(proposed):
        decision = ApprovalRequest.Decision.EDIT  # approving an edited proposal runs the edit
    now = timezone.now()
    label = ", ".join(voters)[:150]
    message = "\n".join(m for m in dict.fromkeys(messages) if m)
    value = contract.decision_value(
        decision=decision,
        args=final_args,
        message=message,
        by=label,
        approval_id=approval.id,
        tier=approval.tier,
        policy_version=approval.policy_version,
        decided_at=now,
    )
    canary = approval_close(
        approval=approval,
        status=ApprovalRequest.DECISION_STATUS[decision],
        decided_by=user,
        label=label,
        value=value,
        now=now,
        reason=reason,
    )
    role = user_role(user)
    event_record(
        action="approval.decided",
        actor=user,
        run_id=approval.run_id,
        approval_id=approval.id,
        tool=approval.tool,
        data={
            "decision": decision,
            "role": role,
            "quorum": {"required": required, "approvers": voters},
            "policy_version": approval.policy_version,
            **({"warned": warned} if warned else {}),
            **({"reason": approval.reject_reason} if approval.reject_reason else {}),
        },
        private={
            "shown": {"payload": approval.payload, "payload_hash": approval.payload_hash},
            "proposed_args": proposed,
            "final_args": final_args,
            "diff": args_diff(proposed, final_args) if decision == "edit" else {},
            "message": message,
            "note": note,
        },
        request=request,
    )
    notifications_create(
        approval=approval,
        event=Notification.Event.DECISION,
        tier=tier,
        detail=f"{label} chose {decision}.",
    )
    approval_wait_record(approval=approval, decision=decision, role=role)
    run_advance_enqueue(run_id=approval.run_id)
    seconds = (now - approval.created_at).total_seconds()  # observed once it is committed
    if canary is None:  # a canary would skew the decision counters
        transaction.on_commit(
            lambda: decision_observe(tier=approval.tier, decision=decision, seconds=seconds)
        )


def user_role(user: Any) -> str:
    if user.is_superuser:
        return "admin"
    groups = sorted(user.groups.values_list("name", flat=True))
    return ",".join(groups) if groups else "approver"
