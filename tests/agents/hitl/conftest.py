"""Agents as users write them: plain LangChain ``HumanInTheLoopMiddleware`` agents, a graph with
parallel ``Send`` branches, and the example helpdesk agent, all driven through the runner."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from typing import Annotated, Any, TypedDict

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send, interrupt

from agents.runtime import registry
from agents.runtime.llm import OfflineChatModel, OfflineReply
from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from tests import audit_purge

# Tools run on the tool node's helper threads with their own connections: these tests are
# transactional, so their flush must be allowed to empty the append-only audit table.
audit_purge.install()

SENT: list[dict[str, Any]] = []
DELETED: list[str] = []


@tool
def send_email(to: str, body: str) -> str:
    """Send an email."""
    SENT.append({"to": to, "body": body})
    return f"sent to {to}"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    DELETED.append(path)
    return f"deleted {path}"


def email_and_delete(messages: list[BaseMessage], tools: list[str]) -> OfflineReply:
    """One turn with two tool calls, then a summary."""
    if isinstance(messages[-1], ToolMessage):
        return "Both handled.", []
    return (
        "Emailing Alice, then deleting the report.",
        [
            {"name": "send_email", "args": {"to": "alice@example.com", "body": "Report attached"}},
            {"name": "delete_file", "args": {"path": "/reports/q3.pdf"}},
        ],
    )


def hitl_factory(mode: str) -> Callable[..., Any]:
    def build(*, checkpointer: Any = None) -> Any:
        return create_agent(
            OfflineChatModel(responder=email_and_delete),
            tools=[send_email, delete_file],
            middleware=[
                HumanInTheLoopMiddleware(
                    interrupt_on={
                        "send_email": True,
                        "delete_file": {"allowed_decisions": ["approve", "reject"]},
                    },
                    interrupt_mode=mode,
                )
            ],
            checkpointer=checkpointer,
        )

    return build


@pytest.fixture
def hitl_agent() -> Iterator[Callable[[str], str]]:
    """``hitl_agent("batched" | "per_call")`` registers a plain HITL agent; returns its name."""
    names: list[str] = []
    SENT.clear()
    DELETED.clear()

    def register(mode: str) -> str:
        name = f"hitl_{mode}"
        agent_register(AgentSpec(name=name, version="1", factory=hitl_factory(mode)))
        names.append(name)
        return name

    yield register
    for name in names:
        agent_unregister(name)
    SENT.clear()
    DELETED.clear()


# --- parallel Send branches, each asking with LangChain's batched HITLRequest ----------------


class FanState(TypedDict, total=False):
    """State of the fan-out graph."""

    paths: list[str]
    """Files to review, one Send branch each."""

    outcome: Annotated[list[str], operator.add]
    """One line per branch: the path and the decision it got."""


def _fan(state: FanState) -> list[Send]:
    return [Send("review", {"paths": [path]}) for path in state["paths"]]


def _review(state: FanState) -> dict[str, Any]:
    path = state["paths"][0]
    answer = interrupt(
        {
            "action_requests": [
                {"name": "delete_file", "args": {"path": path}, "description": f"Delete {path}?"}
            ],
            "review_configs": [
                {"action_name": "delete_file", "allowed_decisions": ["approve", "reject"]}
            ],
        }
    )
    decision = answer["decisions"][0]
    if decision["type"] == "approve":
        DELETED.append(path)
    return {"outcome": [f"{path}:{decision['type']}"]}


def build_fan_graph(*, checkpointer: Any = None) -> Any:
    builder = StateGraph(FanState)
    builder.add_node("review", _review)
    builder.add_conditional_edges(START, _fan, ["review"])
    builder.add_edge("review", END)
    return builder.compile(checkpointer=checkpointer)


# --- a graph asking something the console does not recognise --------------------------------


class QuestionState(TypedDict, total=False):
    """State of the question graph."""

    answer: str
    """What the person answered."""


def _ask(state: QuestionState) -> dict[str, Any]:
    return {"answer": interrupt({"question": "<script>alert(1)</script> Which region?"})}


def build_question_graph(*, checkpointer: Any = None) -> Any:
    builder = StateGraph(QuestionState)
    builder.add_node("ask", _ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=checkpointer)


@pytest.fixture
def graph_agent() -> Iterator[Callable[[str, Callable[..., Any]], str]]:
    """``graph_agent(name, factory)`` registers a plain graph as an agent."""
    names: list[str] = []
    DELETED.clear()

    def register(name: str, factory: Callable[..., Any]) -> str:
        agent_register(AgentSpec(name=name, version="1", factory=factory))
        names.append(name)
        return name

    yield register
    for name in names:
        agent_unregister(name)
    DELETED.clear()


# --- the example agent, registered through the CONSOLE_AGENTS setting ------------------------

HELPDESK_SETTING = {"helpdesk": "examples.helpdesk_agent.agent:build"}


@pytest.fixture
def helpdesk(settings, monkeypatch) -> Iterator[str]:
    """The example agent, registered the way users do: the CONSOLE_AGENTS setting."""
    from examples.helpdesk_agent import crm

    saved = {key: dict(value) for key, value in crm.CUSTOMERS.items()}
    settings.CONSOLE_AGENTS = HELPDESK_SETTING
    monkeypatch.setattr(registry, "_settings_loaded", False)
    yield "helpdesk"
    agent_unregister("helpdesk")
    for key, value in saved.items():
        crm.CUSTOMERS[key] = value
