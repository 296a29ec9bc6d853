"""A helpdesk agent, written the way you would write your own, governed by the console.

Three tools: ``lookup_customer`` reads, ``issue_credit`` moves money (tier ``write``),
``close_account`` cannot be undone (tier ``critical``). ``ConsoleGateMiddleware`` asks the
console before each call whose tier needs a person, and runs the approved calls exactly once
through the console's effects ledger. Register it with::

    export CONSOLE_AGENTS='{"helpdesk": "examples.helpdesk_agent.agent:build"}'
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from langchain.agents import create_agent
from langchain_core.tools import InjectedToolArg, tool

from agents.hitl import ConsoleGateMiddleware, console_tool
from agents.runtime.llm import chat_model_get
from examples.helpdesk_agent import crm
from examples.helpdesk_agent.offline import helpdesk_responder

SYSTEM_PROMPT = (
    "You are a helpdesk agent. Look the customer up before you act. Credit a customer only "
    "for a charge they should not have paid; close an account only when its owner asks."
)


@tool
def lookup_customer(customer_id: str) -> str:
    """Look up a customer's name, plan, balance and account status."""
    customer = crm.customer_get(customer_id)
    return json.dumps(customer or {"error": f"no customer {customer_id}"}, sort_keys=True)


@console_tool(
    tier="write",
    blast_radius="Credits {amount} USD to customer {customer_id}",
    on_deny="Customer {customer_id} gets no credit; their balance stays as it is.",
)
@tool
def issue_credit(
    customer_id: str,
    amount: int,
    reason: str,
    idempotency_key: Annotated[str, InjectedToolArg] = "",
) -> str:
    """Credit a customer's account, in whole US dollars."""
    result = crm.credit_issue(customer_id=customer_id, amount=amount, key=idempotency_key)
    return json.dumps(result, sort_keys=True)


@console_tool(
    tier="critical",
    blast_radius="Closes customer {customer_id}'s account for good; it cannot be reopened",
    on_deny="Customer {customer_id}'s account stays open.",
)
@tool
def close_account(
    customer_id: str,
    reason: str,
    idempotency_key: Annotated[str, InjectedToolArg] = "",
) -> str:
    """Close a customer's account at their request."""
    result = crm.account_close(customer_id=customer_id, key=idempotency_key)
    return json.dumps(result, sort_keys=True)


TOOLS = [lookup_customer, issue_credit, close_account]


def build(*, checkpointer: Any = None) -> Any:
    """The factory the console calls (``CONSOLE_AGENTS``): a compiled graph."""
    return create_agent(
        # AGENT_MODEL (e.g. "openai:gpt-4.1-mini") picks a real model; unset, a scripted one.
        chat_model_get(offline_responder=helpdesk_responder),
        tools=TOOLS,
        system_prompt=SYSTEM_PROMPT,
        middleware=[ConsoleGateMiddleware(tools=TOOLS, risk={"lookup_customer": "read"})],
        checkpointer=checkpointer,
        name="helpdesk",
    )
