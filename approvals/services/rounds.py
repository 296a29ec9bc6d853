"""Quorum rounds: an edit replaces the proposal (new args, new payload hash, a new round), and
an edit whose args fall in a higher tier moves the approval to that tier's rules (invariant 12).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone

from approvals import policy
from approvals.models import ApprovalRequest
from approvals.services.requests import due_times
from audit.canonical import canonical_hash
from audit.services import event_record


def round_start(*, approval: ApprovalRequest, args: dict[str, Any], by: Any) -> None:
    """An edit short of quorum replaces the proposal: new args, new payload hash, new round."""
    if approval.original_args is None:
        approval.original_args = approval.args
    approval.args = args
    payload = dict(approval.payload) if isinstance(approval.payload, dict) else {}
    payload["args"] = args
    payload["edited_by"] = by.get_username()
    approval.payload = payload
    approval.payload_hash = canonical_hash(payload)
    approval.quorum_round += 1
    approval.save(
        update_fields=["original_args", "args", "payload", "payload_hash", "quorum_round"]
    )


def tier_raise(
    *, approval: ApprovalRequest, args: dict[str, Any], by: Any, request: Any = None
) -> bool:
    """Move a locked approval to the tier its edited ``args`` fall in, when that tier is higher.

    The approval takes that tier's quorum, required group, allowed decisions and expiry (from
    now), and starts a new round for the edited args; the payload hash changes, so reviewers
    who loaded the old proposal get 409, and earlier votes lapse. Returns whether it moved.
    """
    new_tier = policy.tier_for_call(tool=approval.tool, args=args, default_tier=approval.tier)
    if policy.tier_level(new_tier) <= policy.tier_level(approval.tier):
        return False
    old_tier = approval.tier
    now = timezone.now()
    row = policy.tier_get(new_tier)
    expires_at = now + dt.timedelta(seconds=policy.tier_ttl_seconds(new_tier))
    by_tier = policy.tier_allowed_decisions(new_tier)
    # What the agent can take, narrowed by the new tier; never a decision the tier forbids.
    allowed = [d for d in approval.allowed_decisions if d in by_tier] or list(by_tier)
    approval.tier = new_tier
    approval.expires_at = expires_at
    approval.allowed_decisions = allowed
    approval.escalated_at = None
    for field, value in due_times(tier=row, expires_at=expires_at).items():
        setattr(approval, field, value)
    payload = dict(approval.payload) if isinstance(approval.payload, dict) else {}
    payload.update(
        tier=new_tier,
        expires_at=expires_at.isoformat(),
        allowed_decisions=approval.allowed_decisions,
        tier_raised_from=old_tier,
    )
    approval.payload = payload
    approval.save(
        update_fields=[
            "tier",
            "expires_at",
            "allowed_decisions",
            "escalated_at",
            "remind_at",
            "escalate_at",
            "payload",
        ]
    )
    round_start(approval=approval, args=args, by=by)
    event_record(
        action="approval.tier_raised",
        actor=by,
        run_id=approval.run_id,
        approval_id=approval.id,
        tool=approval.tool,
        data={
            "from_tier": old_tier,
            "to_tier": new_tier,
            "round": approval.quorum_round,
            "payload_hash": approval.payload_hash,
            "expires_at": expires_at.isoformat(),
        },
        private={"args": args},
        request=request,
    )
    return True
