"""Approvals requested and decided through the services, the way the runner and the pages do.

``request_approval`` goes through ``approval_requests_sync`` on purpose (due times, policy
version, the audit event, notifications), unlike ``ApprovalFactory`` which only writes the row.
Its args schema has no maximum: an edit above 500 raises the tier instead of failing the schema.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone

from approvals import services as approval_services
from approvals.models import AgentRun, ApprovalRequest
from tests.support.factories import ALL_DECISIONS, RunFactory

REFUND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "amount": {"type": "number", "exclusiveMinimum": 0},
    },
    "required": ["order_id", "amount"],
    "additionalProperties": False,
}


def request_approval(
    *,
    requester: User,
    tier: str,
    tool: str = "refund_order",
    args: dict[str, Any] | None = None,
    ttl: dt.timedelta = dt.timedelta(minutes=20),
    run: AgentRun | None = None,
    extra_payload: dict[str, Any] | None = None,
) -> ApprovalRequest:
    """An approval created like the runner does, on ``run`` or a new waiting run of
    ``requester``."""
    args = args if args is not None else {"order_id": "A-1", "amount": 120}
    run = run or RunFactory(requested_by=requester)
    payload = {
        "type": "console.approval",
        "tool": tool,
        "args": args,
        "rationale": "The customer was charged twice.",
        "evidence": [],
        "args_schema": REFUND_SCHEMA,
        "tier": tier,
        **(extra_payload or {}),
    }
    (approval,) = approval_services.approval_requests_sync(
        run=run,
        requests=[
            {
                "interrupt_id": uuid.uuid4().hex,
                "action_index": 0,
                "tool": tool,
                "args": args,
                "payload": payload,
                "tier": tier,
                "allowed_decisions": list(ALL_DECISIONS),
                "expires_at": timezone.now() + ttl,
            }
        ],
    )
    return approval


def decide(approval: ApprovalRequest, user: User, decision: str = "approve", **kwargs: Any):
    """``approval_decide`` on the approval as it is now, having seen its current payload hash
    unless ``seen_hash`` says otherwise."""
    approval.refresh_from_db()
    return approval_services.approval_decide(
        approval=approval,
        user=user,
        decision=decision,
        seen_hash=kwargs.pop("seen_hash", approval.payload_hash),
        **kwargs,
    )
