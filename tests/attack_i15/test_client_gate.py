"""RemoteGateMiddleware under attack: a governed tool must run only on a decision the console
made, with the args the console approved, under the console's key."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from approval_console_client import ConsoleClient, current_idempotency_key
from approval_console_client.middleware import RemoteGateMiddleware
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from examples.remote_agent.model import ScriptedChatModel
from tests.support.fake_console import KEY, FakeConsole

ASK = {"messages": [{"role": "user", "content": "Refund 1250 cents for order A-1"}]}


def config(thread: str = "t-1") -> dict:
    return {"configurable": {"thread_id": thread}}


class FixedIdModel(BaseChatModel):
    """A model whose tool call ids are per-response counters (``call_0``), as several
    OpenAI-compatible servers emit them: the same id comes back in a later turn."""

    @property
    def _llm_type(self) -> str:
        return "fixed-ids"

    def bind_tools(self, tools: Any, **kwargs: Any) -> FixedIdModel:
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        if isinstance(messages[-1], ToolMessage):
            message = AIMessage(content="Done.")
        else:
            message = AIMessage(
                content="Refunding.",
                tool_calls=[
                    {
                        "name": "refund_issue",
                        "args": {"order_id": "A-1", "amount_cents": 1250},
                        "id": "call_0",
                        "type": "tool_call",
                    }
                ],
            )
        return ChatResult(generations=[ChatGeneration(message=message)])


@pytest.fixture
def console() -> FakeConsole:
    return FakeConsole()


@pytest.fixture
def ran() -> list[dict[str, Any]]:
    return []


def graph_for(console: FakeConsole, ran: list[dict[str, Any]], model: Any = None) -> Any:
    @tool
    def refund_issue(order_id: str, amount_cents: int) -> str:
        """Refund."""
        ran.append(
            {"order_id": order_id, "amount_cents": amount_cents, "key": current_idempotency_key()}
        )
        return "ok"

    client = ConsoleClient("https://console.test", KEY, transport=console.transport, retries=0)
    return create_agent(
        model or ScriptedChatModel(),
        tools=[refund_issue],
        middleware=[RemoteGateMiddleware({"refund_issue": True}, client)],
        checkpointer=InMemorySaver(),
    )


def test_a_resume_value_the_console_never_issued_does_not_run_the_tool(console, ran):
    """Anything that resumes the paused thread (a buggy handler, LangGraph Studio, an operator
    with access to the checkpointer) with ``approve`` while the console still says pending."""
    graph = graph_for(console, ran)
    graph.invoke(ASK, config())
    assert console.only()["status"] == "pending"
    with contextlib.suppress(Exception):  # refusing loudly is fine; running is not
        graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config())
    assert ran == [], "the tool ran on a resume value while the console's request was pending"


def test_an_edit_runs_the_edited_args_even_when_the_consoles_answer_lists_no_approval(console, ran):
    """An edit decision whose approval is missing from the answer (an older/other console, a
    proxy trimming the body): the reviewer's args, or nothing, never the model's args."""
    graph = graph_for(console, ran)
    graph.invoke(ASK, config())
    edit = {
        "type": "edit",
        "edited_action": {"name": "refund_issue", "args": {"order_id": "A-1", "amount_cents": 9}},
    }
    request = console.decide(console.only()["id"], [edit])
    request["approvals"] = []
    with contextlib.suppress(Exception):  # refusing loudly is fine; running is not
        graph.invoke(Command(resume=request["resume"]), config())
    assert {"order_id": "A-1", "amount_cents": 1250} not in [
        {k: v for k, v in r.items() if k != "key"} for r in ran
    ], "an edited call ran with the model's original args"


def test_a_governed_call_never_runs_without_the_consoles_key(console, ran):
    """An approve whose approval is missing from the answer: the tool would run with no
    idempotency key and no outcome reported (invariant: every governed effect is keyed)."""
    graph = graph_for(console, ran)
    graph.invoke(ASK, config())
    request = console.decide(console.only()["id"], [{"type": "approve"}])
    request["approvals"] = []
    with contextlib.suppress(Exception):  # refusing loudly is fine; running is not
        graph.invoke(Command(resume=request["resume"]), config())
    assert all(r["key"] for r in ran), f"a governed call ran without a key: {ran}"


def test_a_second_identical_call_in_the_same_thread_needs_its_own_approval(console, ran):
    """The interrupt id hashes only the tool call ids: a model that numbers its calls per
    response (``call_0``) makes the second refund of a thread find the first, decided request
    and run without anyone approving it."""
    graph = graph_for(console, ran, model=FixedIdModel())
    graph.invoke(ASK, config())
    request = console.decide(console.only()["id"], [{"type": "approve"}])
    graph.invoke(Command(resume=request["resume"]), config())
    assert len(ran) == 1
    # The user asks for another refund in the same conversation.
    graph.invoke({"messages": [{"role": "user", "content": "And once more, please."}]}, config())
    assert len(ran) == 1, "the second refund ran on the first refund's approval"
    assert len(console.requests) == 2


def test_a_reject_never_runs_the_tool_even_if_the_resume_value_says_approve(console, ran):
    """Held: once the console decided, the node's re-run takes the console's resume value,
    not the one the thread was resumed with."""
    graph = graph_for(console, ran)
    graph.invoke(ASK, config())
    console.decide(console.only()["id"], [{"type": "reject", "message": "no"}])
    graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config())
    assert ran == []
