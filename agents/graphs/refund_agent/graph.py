"""The refund agent: LangChain's create_agent with the console's approval gate as middleware.

refund_order is gated when amount > 0 (a policy rule by amount replaces this later); once
approved it runs as a saga (payment, inventory, notification), each step once through the
effects ledger, compensated in reverse order if a later step fails.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from langchain.agents import create_agent

from agents.graphs.refund_agent.offline import refund_responder
from agents.graphs.refund_agent.prompts import SYSTEM_PROMPT, request_prompt
from agents.graphs.refund_agent.state import RefundInput
from agents.graphs.refund_agent.tools import TOOLS
from agents.hitl import ApprovalGateMiddleware
from agents.runtime.llm import chat_model_get
from agents.runtime.registry import AgentSpec, agent_register

NAME = "refund_agent"
VERSION = "1"


def refund_needs_gate(args: dict[str, Any]) -> bool:
    return Decimal(str(args.get("amount", "0"))) > 0


def build(*, checkpointer: Any = None) -> Any:
    return create_agent(
        chat_model_get(offline_responder=refund_responder),
        tools=TOOLS,
        system_prompt=SYSTEM_PROMPT,
        middleware=[ApprovalGateMiddleware(gated={"refund_order": refund_needs_gate})],
        checkpointer=checkpointer,
        name=NAME,
    )


def make_input(run_input: dict[str, Any]) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": request_prompt(run_input)}]}


agent_register(
    AgentSpec(
        name=NAME,
        version=VERSION,
        factory=build,
        description="Refunds an order after approval: payment, restock and customer email.",
        input_model=RefundInput,
        make_input=make_input,
        subjects={"customer_email": "email"},
        example_input={
            "order_id": "A-1001",
            "amount": "49.90",
            "reason": "arrived damaged",
            "sku": "MUG-BLUE",
            "quantity": 1,
            "customer_email": "customer@example.com",
        },
    )
)
