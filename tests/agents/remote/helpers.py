"""Shared values of the remote service tests: interrupt values in each protocol, an opener."""

from __future__ import annotations

from typing import Any

from agents.remote.models import ExternalAgent, RemoteRequest
from agents.remote.services import remote_request_open
from approvals.models import ApprovalRequest


def refund(amount: float = 20, order_id: str = "o-1") -> dict[str, Any]:
    """refund_order's args (valid against its schema)."""
    return {"order_id": order_id, "amount": amount, "reason": "damaged", "sku": "S-1"}


def hitl(
    name: str = "refund_order",
    decisions: tuple[str, ...] = ("approve", "edit", "reject"),
    **args: Any,
) -> dict[str, Any]:
    """A LangChain HITLRequest asking about one call."""
    return {
        "action_requests": [{"name": name, "args": args or refund()}],
        "review_configs": [{"action_name": name, "allowed_decisions": list(decisions)}],
    }


def console_payload(tier: str = "read", **args: Any) -> dict[str, Any]:
    """The console's own payload, claiming a tier (which the console ignores)."""
    return {
        "type": "console.approval",
        "tool": "refund_order",
        "args": args or refund(900),
        "tier": tier,
        "rationale": "the customer asked",
    }


def open_request(
    agent: ExternalAgent,
    value: Any = None,
    *,
    thread_id: str = "t-1",
    interrupt_id: str = "i-1",
    **kwargs: Any,
) -> tuple[RemoteRequest, list[ApprovalRequest]]:
    remote, _ = remote_request_open(
        agent=agent,
        thread_id=thread_id,
        interrupt_id=interrupt_id,
        value=hitl() if value is None else value,
        **kwargs,
    )
    approvals = list(
        ApprovalRequest.objects.filter(
            run_id=remote.run_id, interrupt_id=remote.approval_interrupt_id
        ).order_by("action_index")
    )
    return remote, approvals
