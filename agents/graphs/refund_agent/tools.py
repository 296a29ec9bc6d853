"""The refund agent's tools, as LangChain tools over the registry's refund saga."""

from __future__ import annotations

import json
from decimal import Decimal

from langchain.tools import ToolRuntime
from langchain_core.tools import tool

from agents.graphs.refund_agent.saga import refund_saga_run
from agents.hitl import gate_decision


@tool
def refund_order(
    order_id: str,
    amount: Decimal,
    reason: str,
    sku: str,
    runtime: ToolRuntime,
    quantity: int = 1,
    customer_email: str = "customer@example.com",
    currency: str = "USD",
) -> str:
    """Refund an order: money back to the customer, item restocked, customer emailed."""
    thread_id = runtime.config["configurable"]["thread_id"]
    decision = gate_decision(runtime.state, runtime.tool_call_id) or {}
    outcome = refund_saga_run(
        run_id=thread_id,
        key=f"{thread_id}:{runtime.tool_call_id}",
        args={
            "order_id": order_id,
            "amount": str(amount),
            "reason": reason,
            "sku": sku,
            "quantity": quantity,
            "customer_email": customer_email,
            "currency": currency,
        },
        approval_id=decision.get("approval_id"),
    )
    return json.dumps(outcome, sort_keys=True)


TOOLS = [refund_order]
