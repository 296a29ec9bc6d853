"""What happens if denied: tools declare it (``on_deny``, with ``{arg}`` placeholders), the gate
and the HITL protocol adapters carry it with what the run does next, and every path says what
really happens on a reject."""

from __future__ import annotations

import dataclasses

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import BaseModel

from agents.graphs.incident_copilot.graph import build as build_incident
from agents.graphs.refund_agent.graph import build as build_refund
from agents.graphs.refund_agent.graph import make_input
from agents.hitl import console_tool
from agents.hitl.gate import gate_payload
from agents.hitl.on_deny import AGENT_GOES_ON, GRAPH_DECIDES, HITL_BATCH, HITL_GOES_ON
from agents.hitl.protocol import approval_items
from agents.runtime.registry import agent_get
from agents.tools import ToolSpec, tool_find, tool_get, tool_register, tool_unregister
from approvals.contract import ON_DENY_UNKNOWN, payload_on_deny
from tests.support.factories import RunFactory

REFUND = {
    "order_id": "A-1001",
    "amount": "49.90",
    "reason": "arrived damaged",
    "sku": "MUG-BLUE",
    "quantity": 1,
    "customer_email": "pat@example.com",
}


class _Args(BaseModel):
    order_id: str


def _spec(on_deny: str) -> ToolSpec:
    return ToolSpec(
        name="t",
        description="",
        args_model=_Args,
        tier="write",
        run=lambda a, k: {},
        on_deny=on_deny,
    )


# --- the declaration ---------------------------------------------------------------------------


def test_on_deny_fills_its_placeholders_from_the_calls_args():
    spec = _spec("Order {order_id} is not refunded.")
    assert spec.describe_on_deny({"order_id": "A-7"}) == "Order A-7 is not refunded."


def test_a_placeholder_without_its_arg_stays_as_written_and_the_others_are_filled():
    spec = _spec("Order {order_id} is not refunded; {customer_email} is not emailed.")
    line = spec.describe_on_deny({"order_id": "A-7"})
    assert line == "Order A-7 is not refunded; {customer_email} is not emailed."


def test_a_broken_template_is_shown_as_written_and_none_reads_empty():
    assert _spec("Amount {amount:.2f} stays").describe_on_deny({}) == "Amount {amount:.2f} stays"
    assert _spec("").describe_on_deny({"order_id": "A-7"}) == ""


def test_every_sandbox_tool_with_side_effects_declares_what_a_denial_means():
    missing = [
        spec.name
        for spec in map(tool_get, SANDBOX_NAMES)
        if (spec.has_side_effects or spec.name == "notify_channel") and not spec.on_deny
    ]
    assert missing == []


SANDBOX_NAMES = (
    "create_incident_ticket",
    "close_incident_ticket",
    "rollback_deploy",
    "roll_forward_deploy",
    "notify_channel",
    "refund_order",
    "refund_payment",
    "reverse_refund_payment",
    "restock_inventory",
    "unrestock_inventory",
    "notify_customer",
)


def test_console_tool_declares_on_deny_for_your_own_tools():
    @console_tool(tier="write", on_deny="Ticket {ticket} stays open.")
    @tool
    def close_thing(ticket: str) -> str:
        """Close a thing."""
        return ticket

    try:
        assert (
            tool_get("close_thing").describe_on_deny({"ticket": "T-1"}) == "Ticket T-1 stays open."
        )
    finally:
        tool_unregister("close_thing")


# --- the payloads ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_gate_payload_says_what_the_tool_declares_then_what_the_graph_does():
    payload = gate_payload(
        thread_id="t",
        tool="refund_order",
        args=REFUND,
        rationale="",
        evidence=[],
        tier="write",
        on_deny="The run ends.",
    )
    assert payload["on_deny"] == (
        "Order A-1001 is not refunded: no money moves, nothing is restocked and "
        "pat@example.com is not emailed. The run ends."
    )


@pytest.mark.django_db
def test_a_graph_that_does_not_say_what_it_does_next_is_said_to_take_its_own_step():
    spec = tool_get("refund_order")
    tool_register(dataclasses.replace(spec, on_deny=""))
    try:
        payload = gate_payload(
            thread_id="t", tool="refund_order", args=REFUND, rationale="", evidence=[], tier="write"
        )
    finally:
        tool_register(spec)
    assert payload["on_deny"] == GRAPH_DECIDES


@pytest.mark.django_db
def test_the_per_call_protocol_adapter_carries_on_deny():
    value = {"type": "tool_approval", "name": "refund_order", "args": REFUND, "id": "c1"}
    (item,) = approval_items(interrupt_id="i", value=value)
    declared = tool_get("refund_order").describe_on_deny(REFUND)
    assert item["payload"]["on_deny"] == f"{declared} {HITL_GOES_ON}"


@pytest.mark.django_db
def test_the_batched_protocol_adapter_carries_on_deny_for_each_action():
    value = {
        "action_requests": [
            {"name": "notify_channel", "args": {"channel": "ops", "message": "hi"}},
            {"name": "some_agent_tool", "args": {"x": 1}},
        ],
        "review_configs": [
            {"action_name": "notify_channel", "allowed_decisions": ["approve", "reject"]},
            {"action_name": "some_agent_tool", "allowed_decisions": ["approve", "reject"]},
        ],
    }
    assert tool_find("some_agent_tool") is None
    post, unknown = approval_items(interrupt_id="i", value=value)
    assert post["payload"]["on_deny"] == f"Nothing is posted to #ops. {HITL_GOES_ON}{HITL_BATCH}"
    # A tool the console does not know declares nothing: only what the run does.
    assert unknown["payload"]["on_deny"] == HITL_GOES_ON + HITL_BATCH


def test_a_payload_without_on_deny_says_what_is_true_of_every_path():
    assert payload_on_deny({"type": "console.approval"}) == ON_DENY_UNKNOWN
    assert payload_on_deny({"on_deny": "  "}) == ON_DENY_UNKNOWN
    assert payload_on_deny("erased") == ON_DENY_UNKNOWN
    assert payload_on_deny({"on_deny": "The run ends."}) == "The run ends."


# --- what really happens, per path -------------------------------------------------------------


def _config(run) -> dict:
    return {"configurable": {"thread_id": run.thread_id}}


def _reject(graph, run, interrupt, message: str):
    value = {"decision": "reject", "args": {}, "message": message, "by": "bob", "approval_id": None}
    graph.invoke(Command(resume={interrupt.id: value}), _config(run), durability="sync")


@pytest.mark.django_db(transaction=True)
def test_the_refund_agent_says_the_run_goes_on_and_after_a_reject_it_does(alice):
    run = RunFactory(agent="refund_agent", requested_by=alice)
    graph = build_refund(checkpointer=InMemorySaver())
    request = agent_get("refund_agent").validate_input(REFUND)
    graph.invoke(make_input(request), _config(run), durability="sync")
    (interrupt,) = graph.get_state(_config(run)).interrupts
    assert interrupt.value["on_deny"].startswith("Order A-1001 is not refunded")
    assert interrupt.value["on_deny"].endswith(AGENT_GOES_ON)

    _reject(graph, run, interrupt, "outside the return window")
    messages = graph.get_state(_config(run)).values["messages"]
    rejected = next(i for i, m in enumerate(messages) if isinstance(m, ToolMessage))
    assert "outside the return window" in messages[rejected].content  # told, with the reason
    assert any(isinstance(m, AIMessage) for m in messages[rejected + 1 :])  # and it went on


@pytest.mark.django_db(transaction=True)
def test_the_incident_copilot_says_the_run_ends_and_after_a_reject_it_does(alice):
    run = RunFactory(agent="incident_copilot", requested_by=alice)
    graph = build_incident(checkpointer=InMemorySaver())
    incident = {"service": "checkout", "signal": "5xx above 5%", "severity": "sev3"}
    graph.invoke(incident, _config(run), durability="sync")
    (interrupt,) = graph.get_state(_config(run)).interrupts
    assert interrupt.value["tool"] == "create_incident_ticket"
    assert interrupt.value["on_deny"] == (
        "No ticket is opened for checkout and nobody is paged. The action is not taken; "
        "#incidents is told you rejected it (with your reason) and the run ends."
    )

    _reject(graph, run, interrupt, "duplicate")
    state = graph.get_state(_config(run))
    assert state.next == ()  # the run ended
    assert state.values["outcome"]["status"] == "rejected"
