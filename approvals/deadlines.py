"""What happens if nobody decides a pending approval: the expiry's default decision and when it
applies, and the reminder and escalation still due (what the sweep will do, services/sweep.py).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from approvals import policy
from approvals.contract import TIMEOUT_ACTOR
from approvals.models import ApprovalRequest, RiskTier
from audit.canonical import canonical_hash


@dataclass(frozen=True)
class Deadlines:
    """``decision`` (reject or approve) is applied by ``by`` at ``expires_at``; a reminder is
    due at ``remind_at`` (or went out at ``reminded_at``); the approval escalates to
    ``escalation_group`` at ``escalate_at`` (or did at ``escalated_at``)."""

    expires_at: dt.datetime
    decision: str
    by: str
    remind_at: dt.datetime | None
    reminded_at: dt.datetime | None
    escalate_at: dt.datetime | None
    escalated_at: dt.datetime | None
    escalation_group: str | None

    @property
    def approves(self) -> bool:
        return self.decision in (ApprovalRequest.Decision.APPROVE, ApprovalRequest.Decision.EDIT)

    def as_dict(self) -> dict[str, Any]:
        """For the API (its JSON renderer writes the times)."""
        return {
            "at": self.expires_at,
            "decision": self.decision,
            "by": self.by,
            "remind_at": self.remind_at,
            "reminded_at": self.reminded_at,
            "escalate_at": self.escalate_at,
            "escalated_at": self.escalated_at,
            "escalation_group": self.escalation_group,
        }


def approval_deadlines(*, approval: ApprovalRequest) -> Deadlines | None:
    """The plan for a pending approval, from its tier's policy now (the sweep reads the tier
    when it acts) and its own due times; None once it is decided."""
    if not approval.is_pending:
        return None
    tier = policy.tier_get(approval.tier)
    default = tier.expiry_decision if tier else RiskTier.ExpiryDecision.REJECT
    decision = expiry_decision_applied(approval=approval, default=str(default))
    group = tier.escalation_group.name if tier and tier.escalation_group_id else None
    return Deadlines(
        expires_at=approval.expires_at,
        decision=str(decision),
        by=TIMEOUT_ACTOR,
        remind_at=approval.remind_at,
        reminded_at=approval.reminded_at,
        escalate_at=approval.escalate_at,
        escalated_at=approval.escalated_at,
        escalation_group=group,
    )


def expiry_decision_applied(*, approval: ApprovalRequest, default: str) -> str:
    """The decision the expiry applies to ``approval`` under its tier's ``default``.

    An approve the request does not allow (the agent's own review config left it out: LangChain
    would refuse it, an Agent Inbox graph would run it) is a reject. An approve of a round that
    an edit vote opened runs that round's args, so it is an edit: what runs is what the console
    records (as ``approval_finalise`` turns an approve of an edited proposal into an edit).
    """
    if default != ApprovalRequest.Decision.APPROVE:
        return default
    if ApprovalRequest.Decision.APPROVE not in (approval.allowed_decisions or []):
        return ApprovalRequest.Decision.REJECT
    if canonical_hash(approval.args) != canonical_hash(approval.proposed_args):
        return ApprovalRequest.Decision.EDIT
    return default
