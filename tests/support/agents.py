"""Small test agents, importable by tests: a note agent with one gated tool (runner tests),
plain LangChain ``HumanInTheLoopMiddleware`` agents, a graph with parallel ``Send`` branches and
a graph asking a question the console does not recognise, and a graph written for Agent Inbox
(HITL tests).

The fixtures that register them live in the conftest.py of the tests that use them; what the
tools did is recorded in ``CALLS`` (note agent), ``SENT`` and ``DELETED`` (HITL agents),
``INBOX_RESUMES`` and ``REFUNDS`` (Agent Inbox graph).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send, interrupt
from pydantic import BaseModel

from agents.hitl.gate import approval_gate
from agents.runtime.llm import OfflineChatModel, OfflineReply

# --- the note agent: propose, approve (gated write_note), execute ----------------------------

CALLS: list[dict[str, Any]] = []


class NoteArgs(BaseModel):
    text: str
    count: int = 1


def write_note(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    CALLS.append({"args": args, "key": key})
    return {"written": args["text"]}


class NoteState(TypedDict, total=False):
    """State of the test agent."""

    topic: str
    decision: dict
    log: Annotated[list, operator.add]


def note_propose(state: NoteState) -> dict:
    return {"log": ["propose"]}


def note_approve(state: NoteState) -> dict:
    decision = approval_gate(
        tool="write_note",
        args={"text": f"about {state['topic']}", "count": 1},
        rationale="the test needs a note",
        evidence=["e1"],
    )
    return {"decision": decision, "log": ["approve"]}


def note_execute(state: NoteState) -> dict:
    decision = state["decision"]
    if decision["decision"] in ("approve", "edit"):
        write_note(decision["args"], None)
        return {"log": ["executed"]}
    return {"log": [f"skipped:{decision['decision']}"]}


def build_note_graph(*, checkpointer: Any, with_execute: bool = True) -> Any:
    builder = StateGraph(NoteState)
    builder.add_node("propose", note_propose)
    builder.add_node("approve", note_approve)
    builder.add_edge(START, "propose")
    builder.add_edge("propose", "approve")
    if with_execute:
        builder.add_node("execute", note_execute)
        builder.add_edge("approve", "execute")
        builder.add_edge("execute", END)
    else:
        builder.add_edge("approve", END)
    return builder.compile(checkpointer=checkpointer)


class NoteInput(BaseModel):
    topic: str


# --- plain LangChain HITL agents ---------------------------------------------------------------

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


# --- a graph written for Agent Inbox: interrupt([HumanInterrupt])[0] -------------------------

INBOX_RESUMES: list[Any] = []
"""The raw resume value each Agent Inbox interrupt got back, in order."""
REFUNDS: list[dict[str, Any]] = []
"""The refunds the Agent Inbox graph really issued (accept: as asked; edit: as edited)."""

INBOX_CONFIG = {
    "allow_accept": True,
    "allow_edit": True,
    "allow_respond": True,
    "allow_ignore": True,
}


class InboxState(TypedDict, total=False):
    """State of the Agent Inbox graph."""

    order_id: str
    amount: int
    response: dict
    """The ``HumanResponse`` the graph acted on."""


def inbox_factory(*, as_list: bool = True, config: dict[str, bool] | None = None) -> Any:
    """A graph asking about ``issue_refund`` the way Agent Inbox graphs do (a list of one, or
    ``as_list=False``: the request alone) and acting on the ``HumanResponse``."""

    def review(state: InboxState) -> dict[str, Any]:
        args = {"order_id": state["order_id"], "amount": state["amount"]}
        request = {
            "action_request": {"action": "issue_refund", "args": args},
            "config": config or INBOX_CONFIG,
            "description": f"**Refund** order {state['order_id']}: the parcel never arrived.",
        }
        raw = interrupt([request]) if as_list else interrupt(request)
        INBOX_RESUMES.append(raw)
        response = raw[0] if as_list else raw
        if response["type"] == "accept":
            REFUNDS.append(args)
        elif response["type"] == "edit":
            REFUNDS.append(response["args"]["args"])
        return {"response": response}

    def build(*, checkpointer: Any = None) -> Any:
        builder = StateGraph(InboxState)
        builder.add_node("review", review)
        builder.add_edge(START, "review")
        builder.add_edge("review", END)
        return builder.compile(checkpointer=checkpointer)

    return build


# --- the example agent, registered through the CONSOLE_AGENTS setting ------------------------

HELPDESK_SETTING = {"helpdesk": "examples.helpdesk_agent.agent:build"}
