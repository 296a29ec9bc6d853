"""A refund run driven for real (start, approval, decision, saga of three effects) whose input
carries unique strings, to erase and then look for."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from agents.runtime import advance
from agents.services import run_start
from approvals.models import AgentRun
from approvals.services import approval_decide


@dataclass
class Driven:
    run: AgentRun
    email: str
    order_id: str
    reason: str

    @property
    def secrets(self) -> list[str]:
        return [self.email, self.order_id, self.reason]


def refund_input(tag: str | None = None, **overrides: str) -> dict[str, str]:
    tag = tag or uuid.uuid4().hex[:12]
    return {
        "order_id": f"ORD-{tag}",
        "amount": "12.50",
        "reason": f"crushed box {tag}",
        "sku": "MUG-BLUE",
        "quantity": 1,
        "customer_email": f"pat.{tag}@example.com",
        **overrides,
    }


def refund_drive(*, requester, approver, **overrides: str) -> Driven:
    """Start a refund run, approve its refund, and let it complete (three effects)."""
    data = refund_input(**overrides)
    run = run_start(agent="refund_agent", input=data, user=requester)
    assert advance.run_advance(run_id=run.id) == "waiting"
    approval = run.approvals.get()
    approval_decide(
        approval=approval,
        user=approver,
        decision="approve",
        seen_hash=approval.payload_hash,
        message="fine",
    )
    assert advance.run_advance(run_id=run.id) == "completed"
    run.refresh_from_db()
    return Driven(
        run=run, email=data["customer_email"], order_id=data["order_id"], reason=data["reason"]
    )


@pytest.fixture
def driven(alice, bob) -> Driven:
    return refund_drive(requester=alice, approver=bob)


# The note agent (one gated tool; no subjects declared) of the runner's tests.
from tests.agents.runtime.conftest import note_agent  # noqa: E402, F401
