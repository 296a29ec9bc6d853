"""RemoteGateMiddleware in LangChain's create_agent (the example agent's graph), against the
in-memory console: the interrupt it raises, the same request on resume, each decision applied
as LangChain's own middleware would, the idempotency key inside the tool, the outcome report."""

from __future__ import annotations

import httpx
import pytest
from approval_console_client import ConsoleClient, current_idempotency_key
from approval_console_client.middleware import (
    RemoteGateMiddleware,
    pending_request_ids,
    resume_when_decided,
)
from langchain.agents import create_agent
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from examples.remote_agent.agent import agent_build
from examples.remote_agent.model import ScriptedChatModel
from examples.remote_agent.payments import Payments, refund_tool
from tests.support.fake_console import KEY, FakeConsole

ASK = {"messages": [{"role": "user", "content": "Refund 1250 cents for order A-1"}]}


@pytest.fixture
def console() -> FakeConsole:
    return FakeConsole()


@pytest.fixture
def payments(tmp_path) -> Payments:
    return Payments(tmp_path / "payments.sqlite")


@pytest.fixture
def graph(console, payments, tmp_path):
    client = ConsoleClient("https://console.test", KEY, transport=console.transport)
    return agent_build(client=client, payments=payments, checkpoint_path=tmp_path / "cp.sqlite")


def config(thread: str = "t-1") -> dict:
    return {"configurable": {"thread_id": thread}}


def test_a_governed_call_registers_a_hitl_request_and_interrupts_with_its_id(graph, console):
    result = graph.invoke(ASK, config())
    request = console.only()
    (paused,) = result["__interrupt__"]
    assert paused.value["console_request_id"] == request["id"]
    assert pending_request_ids(result) == [request["id"]]
    sent = request["_body"]
    assert sent["thread_id"] == "t-1"
    assert sent["interrupt_id"].startswith("lc-")
    assert sent["value"]["action_requests"][0]["name"] == "refund_issue"
    assert sent["value"]["action_requests"][0]["args"] == {"order_id": "A-1", "amount_cents": 1250}
    assert sent["value"]["review_configs"] == [
        {"action_name": "refund_issue", "allowed_decisions": ["approve", "edit", "reject"]}
    ]
    assert sent["run_input"] == {"input": "Refund 1250 cents for order A-1"}
    assert sent["rationale"] == "The customer asked for a refund."


def test_approve_runs_the_call_once_with_the_consoles_key_and_reports_it(graph, console, payments):
    graph.invoke(ASK, config())
    request = console.decide(console.only()["id"], [{"type": "approve"}])
    result = graph.invoke(Command(resume=request["resume"]), config())
    approval = request["approvals"][0]
    assert len(console.requests) == 1  # the re-run of the node found the same request
    assert [p["idempotency_key"] for p in payments.all()] == [approval["idempotency_key"]]
    assert console.outcomes[approval["id"]] == {
        "approval_id": approval["id"],
        "idempotency_key": approval["idempotency_key"],
        "executed_args": {"order_id": "A-1", "amount_cents": 1250},
        "result": "refunded 1250 cents for order A-1",
        "status": "succeeded",
    }
    assert result["messages"][-1].text == "Done. refund_issue: refunded 1250 cents for order A-1"


def test_edit_runs_the_reviewers_args_and_reports_them(graph, console, payments):
    graph.invoke(ASK, config())
    edit = {
        "type": "edit",
        "edited_action": {"name": "refund_issue", "args": {"order_id": "A-1", "amount_cents": 900}},
    }
    request = console.decide(console.only()["id"], [edit])
    result = graph.invoke(Command(resume=request["resume"]), config())
    approval = request["approvals"][0]
    assert [p["amount_cents"] for p in payments.all()] == [900]
    assert console.outcomes[approval["id"]]["executed_args"] == {
        "order_id": "A-1",
        "amount_cents": 900,
    }
    tool_message = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert "edited" in tool_message.text and "refunded 900 cents" in tool_message.text


def test_reject_runs_nothing_and_tells_the_model_why(graph, console, payments):
    graph.invoke(ASK, config())
    request = console.decide(console.only()["id"], [{"type": "reject", "message": "Too much."}])
    result = graph.invoke(Command(resume=request["resume"]), config())
    assert payments.all() == []
    assert console.outcomes == {}
    tool_message = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert tool_message.status == "error"
    assert (
        tool_message.text == "User rejected the tool call for `refund_issue` with reason: Too much."
    )


def test_a_decision_made_before_the_rerun_is_used_without_pausing_again(graph, console, payments):
    """The agent died after registering and before the callback: run again, it finds the
    decided request and goes on (no second pause, no second request)."""
    graph.invoke(ASK, config())
    console.decide(console.only()["id"], [{"type": "approve"}])
    # Re-run the paused node from its checkpoint, with no resume value.
    result = graph.invoke(None, config())
    assert "__interrupt__" not in result
    assert result["messages"][-1].text.startswith("Done. refund_issue: refunded")
    assert len(payments.all()) == 1
    assert len(console.requests) == 1


def test_the_key_is_readable_inside_a_tool_without_an_injected_argument(console, tmp_path):
    from langchain_core.tools import tool

    seen: list[str | None] = []

    @tool
    def refund_issue(order_id: str, amount_cents: int) -> str:
        """Refund."""
        seen.append(current_idempotency_key())
        return "ok"

    client = ConsoleClient("https://console.test", KEY, transport=console.transport)
    graph = create_agent(
        ScriptedChatModel(),
        tools=[refund_issue],
        middleware=[RemoteGateMiddleware({"refund_issue": True}, client)],
        checkpointer=InMemorySaver(),
    )
    graph.invoke(ASK, config())
    request = console.decide(console.only()["id"], [{"type": "approve"}])
    graph.invoke(Command(resume=request["resume"]), config())
    assert seen == [request["approvals"][0]["idempotency_key"]]
    assert current_idempotency_key() is None


def test_a_tool_that_raises_is_reported_failed(console, tmp_path):
    from langchain_core.tools import tool

    @tool
    def refund_issue(order_id: str, amount_cents: int) -> str:
        """Refund."""
        raise RuntimeError("the bank said no")

    client = ConsoleClient("https://console.test", KEY, transport=console.transport)
    graph = create_agent(
        ScriptedChatModel(),
        tools=[refund_issue],
        middleware=[RemoteGateMiddleware({"refund_issue": True}, client)],
        checkpointer=InMemorySaver(),
    )
    graph.invoke(ASK, config())
    request = console.decide(console.only()["id"], [{"type": "approve"}])
    with pytest.raises(RuntimeError, match="the bank said no"):
        graph.invoke(Command(resume=request["resume"]), config())
    (outcome,) = console.outcomes.values()
    assert outcome["status"] == "failed"
    assert "the bank said no" in str(outcome["result"])


def test_a_failed_outcome_report_does_not_fail_the_run(graph, console, payments):
    inner = console.handle

    def outcome_down(http_request: httpx.Request) -> httpx.Response:
        if http_request.url.path.endswith("/outcome/"):
            return httpx.Response(409, json={"detail": "no"})
        return inner(http_request)

    graph_client = ConsoleClient(
        "https://console.test", KEY, transport=httpx.MockTransport(outcome_down)
    )
    graph2 = create_agent(
        ScriptedChatModel(),
        tools=[refund_tool(payments)],
        middleware=[RemoteGateMiddleware({"refund_issue": True}, graph_client)],
        checkpointer=InMemorySaver(),
    )
    graph2.invoke(ASK, config("t-2"))
    second = next(r for r in console.requests.values() if r["thread_id"] == "t-2")
    console.decide(second["id"], [{"type": "approve"}])
    result = graph2.invoke(Command(resume=console.requests[second["id"]]["resume"]), config("t-2"))
    assert result["messages"][-1].text.startswith("Done.")
    assert len(payments.all()) == 1


def test_resume_when_decided_polls_then_resumes(graph, console, payments):
    result = graph.invoke(ASK, config())
    (request_id,) = pending_request_ids(result)
    console.decide(request_id, [{"type": "approve"}])
    client = ConsoleClient("https://console.test", KEY, transport=console.transport)
    done = resume_when_decided(graph, client, config(), request_id, timeout=5)
    assert done["messages"][-1].text.startswith("Done. refund_issue: refunded")
    assert len(payments.all()) == 1


def test_resume_when_decided_times_out_on_a_pending_request(graph, console):
    result = graph.invoke(ASK, config())
    (request_id,) = pending_request_ids(result)
    client = ConsoleClient("https://console.test", KEY, transport=console.transport)
    with pytest.raises(TimeoutError):
        resume_when_decided(graph, client, config(), request_id, timeout=1)


def test_interrupt_on_without_decisions_is_refused():
    with pytest.raises(ValueError, match="allowed_decisions"):
        RemoteGateMiddleware({"refund_issue": {}}, ConsoleClient("https://c", KEY))


def test_the_async_path_pauses_and_resumes_the_same_way(console, payments):
    import asyncio

    client = ConsoleClient("https://console.test", KEY, transport=console.transport)
    graph = create_agent(
        ScriptedChatModel(),
        tools=[refund_tool(payments)],
        middleware=[RemoteGateMiddleware({"refund_issue": True}, client)],
        checkpointer=InMemorySaver(),
    )

    async def run() -> dict:
        paused = await graph.ainvoke(ASK, config())
        (request_id,) = pending_request_ids(paused)
        request = console.decide(request_id, [{"type": "approve"}])
        return await graph.ainvoke(Command(resume=request["resume"]), config())

    done = asyncio.run(run())
    assert done["messages"][-1].text.startswith("Done. refund_issue: refunded")
    (approval,) = console.only()["approvals"]
    assert [p["idempotency_key"] for p in payments.all()] == [approval["idempotency_key"]]
    assert console.outcomes[approval["id"]]["status"] == "succeeded"


def test_a_resume_while_pending_pauses_again_and_the_consoles_decision_then_applies(
    graph, console, payments
):
    """A stray resume value only wakes the thread: it pauses again on the same request, and
    the console's own decision (an edit here) is what runs once it is made."""
    graph.invoke(ASK, config())
    request_id = console.only()["id"]
    again = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config())
    assert pending_request_ids(again) == [request_id]
    assert payments.all() == []
    edit = {
        "type": "edit",
        "edited_action": {"name": "refund_issue", "args": {"order_id": "A-1", "amount_cents": 5}},
    }
    decided = console.decide(request_id, [edit])
    result = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config())
    assert "__interrupt__" not in result
    assert [p["amount_cents"] for p in payments.all()] == [5]
    assert len(console.requests) == 1
    assert decided["approvals"][0]["id"] in console.outcomes


def test_a_governed_call_reaching_the_tools_without_an_approval_is_answered_not_run(console):
    """Defence in depth: a call routed to the tools with no gate in the state (another
    middleware jumping to the tools) never runs."""
    client = ConsoleClient("https://console.test", KEY, transport=console.transport)
    gate = RemoteGateMiddleware({"refund_issue": True}, client)
    call = {"name": "refund_issue", "args": {"order_id": "A-1"}, "id": "c-1", "type": "tool_call"}
    request = ToolCallRequest(tool_call=call, tool=None, state={"messages": []}, runtime=None)
    ran = []
    answer = gate.wrap_tool_call(
        request, lambda r: ran.append(r) or ToolMessage("ok", tool_call_id="c-1")
    )
    assert ran == []
    assert answer.status == "error"
    assert "not executed" in answer.text
    ungoverned = ToolCallRequest(
        tool_call={**call, "name": "lookup"}, tool=None, state={"messages": []}, runtime=None
    )
    assert (
        gate.wrap_tool_call(ungoverned, lambda r: ToolMessage("ok", tool_call_id="c-1")).text
        == "ok"
    )
