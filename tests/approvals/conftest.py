"""Fixtures for the approval policy tests: the demo policy, people in its groups, approvals
created the way the runner creates them (approval_requests_sync)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from approvals import services as approval_services
from approvals.models import AgentRun, ApprovalRequest
from approvals.services import policy_seed_demo
from tests import audit_purge
from tests.support.queue import (  # noqa: F401 - the tests import tasks_named from here
    NOTIFICATION_MODULES,
    RUNNER_MODULES,
    tasks_named,
)

REFUND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "amount": {"type": "number", "exclusiveMinimum": 0},
    },
    "required": ["order_id", "amount"],
    "additionalProperties": False,
}


@pytest.fixture(autouse=True)
def _nothing_runs(queued):
    """Every task these tests enqueue is recorded on ``queued`` (tests.support.queue)."""
    return queued


@pytest.fixture
def queue_modules():
    """Notification deliveries are recorded too."""
    return (*RUNNER_MODULES, *NOTIFICATION_MODULES)


@pytest.fixture
def demo_policy(db, alice, bob, carol, dave) -> dict[str, Group]:
    """Tiers read / write / critical as seeded for `make run`, with the demo people's groups."""
    policy_seed_demo()
    groups = {g.name: g for g in Group.objects.all()}
    bob.groups.add(groups["approvers-write"])
    carol.groups.add(groups["approvers-write"], groups["approvers-critical"])
    return groups


def run_for(user: User, *, agent: str = "refund_agent") -> AgentRun:
    run_id = uuid.uuid4()
    return AgentRun.objects.create(
        id=run_id,
        thread_id=str(run_id),
        agent=agent,
        graph_version="1",
        status=AgentRun.Status.WAITING,
        requested_by=user,
    )


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
    """An approval created like the runner does (due times, policy version, audit)."""
    args = args if args is not None else {"order_id": "A-1", "amount": 120}
    run = run or run_for(requester)
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
                "allowed_decisions": ["approve", "edit", "reject", "respond"],
                "expires_at": timezone.now() + ttl,
            }
        ],
    )
    return approval


def decide(approval: ApprovalRequest, user: User, decision: str = "approve", **kwargs: Any):
    approval.refresh_from_db()
    return approval_services.approval_decide(
        approval=approval,
        user=user,
        decision=decision,
        seen_hash=kwargs.pop("seen_hash", approval.payload_hash),
        **kwargs,
    )


# The race tests are transactional (each side has its own connection), so their flush must be
# allowed to empty the append-only audit table.
audit_purge.install()
