"""ConsoleGateMiddleware and autonomy: a tool call runs without waiting under its ledger key
``<thread>:<tool call id>`` when a rule lets it, and the agent's stated confidence (the
middleware's hook) reaches the gate and the reviewer's payload."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated

import pytest
from langchain.agents import create_agent
from langchain_core.tools import InjectedToolArg, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agents.hitl import ConsoleGateMiddleware, ToolRisk, tool_adapt
from agents.models import Effect
from agents.runtime.llm import chat_model_get
from agents.tools import tool_find, tool_unregister
from approvals.autonomy_models import AutonomousAction, AutonomyRule
from examples.helpdesk_agent import agent as helpdesk
from examples.helpdesk_agent import crm
from examples.helpdesk_agent.offline import helpdesk_responder
from tests.support.factories import RunFactory

pytestmark = pytest.mark.django_db(transaction=True)

CREDIT_AND_CLOSE = (
    "Customer C-42 was charged twice: credit 30 USD. Customer C-7 asks us to close their account."
)


@tool
def reverse_credit(
    customer_id: str,
    amount: int,
    reason: str,
    idempotency_key: Annotated[str, InjectedToolArg] = "",
) -> str:
    """Take a credit back (the compensation of issue_credit)."""
    return json.dumps(
        crm.credit_issue(customer_id=customer_id, amount=-amount, key=idempotency_key)
    )


@pytest.fixture
def undoable_credit() -> Iterator[None]:
    """issue_credit declared with a compensating tool, as an agent author would."""
    saved = {key: dict(value) for key, value in crm.CUSTOMERS.items()}
    original = tool_find("issue_credit")
    tool_adapt(reverse_credit, risk=ToolRisk(tier="write"), replace=True)
    tool_adapt(
        helpdesk.issue_credit,
        risk=ToolRisk(tier="write", compensate_with="reverse_credit"),
        replace=True,
    )
    yield
    tool_unregister("reverse_credit")
    if original is not None:
        risk = ToolRisk(original.tier, original.blast_radius, original.on_deny)
        tool_adapt(helpdesk.issue_credit, risk=risk, replace=True)
    for key, value in saved.items():
        crm.CUSTOMERS[key] = value


def test_a_post_hoc_tool_runs_under_its_call_key_and_the_critical_one_still_waits(
    undoable_credit, alice
):
    AutonomyRule.objects.create(tool="issue_credit", mode="post_hoc")
    run = RunFactory(agent="helpdesk", requested_by=alice)
    graph = create_agent(
        chat_model_get(offline_responder=helpdesk_responder),
        tools=helpdesk.TOOLS,
        system_prompt=helpdesk.SYSTEM_PROMPT,
        middleware=[
            ConsoleGateMiddleware(
                tools=helpdesk.TOOLS,
                risk={"lookup_customer": "read"},
                confidence=lambda state, call: 0.93,
            )
        ],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": run.thread_id}}
    graph.invoke({"messages": [{"role": "user", "content": CREDIT_AND_CLOSE}]}, config)

    [waiting] = graph.get_state(config).interrupts
    assert waiting.value["tool"] == "close_account"
    assert waiting.value["confidence"] == 0.93
    action = AutonomousAction.objects.get()
    assert action.tool == "issue_credit"
    assert action.key.startswith(f"{run.thread_id}:")
    assert str(action.confidence) == "0.930"
    effect = Effect.objects.get(key=action.key)
    assert effect.tool == "issue_credit"
    assert effect.approval_id is None
    assert crm.CUSTOMERS["C-42"]["balance"] == 30


def test_resuming_the_waiting_call_does_not_ask_about_the_call_that_already_ran(
    undoable_credit, alice
):
    AutonomyRule.objects.create(tool="issue_credit", mode="post_hoc")
    run = RunFactory(agent="helpdesk", requested_by=alice)
    graph = create_agent(
        chat_model_get(offline_responder=helpdesk_responder),
        tools=helpdesk.TOOLS,
        system_prompt=helpdesk.SYSTEM_PROMPT,
        middleware=[ConsoleGateMiddleware(tools=helpdesk.TOOLS, risk={"lookup_customer": "read"})],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": run.thread_id}}
    graph.invoke({"messages": [{"role": "user", "content": CREDIT_AND_CLOSE}]}, config)
    [waiting] = graph.get_state(config).interrupts
    answer = {"decision": "approve", "args": {}, "message": "", "by": "carol", "approval_id": None}
    graph.invoke(Command(resume={waiting.id: answer}), config)

    assert graph.get_state(config).interrupts == ()
    assert AutonomousAction.objects.count() == 1
    assert crm.CUSTOMERS["C-42"]["balance"] == 30
    assert crm.CUSTOMERS["C-7"]["status"] == "closed"
