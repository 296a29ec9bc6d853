"""A tiny agent with one gated tool, to test the runner apart from the demo agents."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel

from agents.hitl.gate import approval_gate
from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from agents.tools import ToolSpec, tool_register

CALLS: list[dict[str, Any]] = []


class NoteArgs(BaseModel):
    text: str
    count: int = 1


def _write_note(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    CALLS.append({"args": args, "key": key})
    return {"written": args["text"]}


class NoteState(TypedDict, total=False):
    """State of the test agent."""

    topic: str
    decision: dict
    log: Annotated[list, operator.add]


def _propose(state: NoteState) -> dict:
    return {"log": ["propose"]}


def _approve(state: NoteState) -> dict:
    decision = approval_gate(
        tool="write_note",
        args={"text": f"about {state['topic']}", "count": 1},
        rationale="the test needs a note",
        evidence=["e1"],
    )
    return {"decision": decision, "log": ["approve"]}


def _execute(state: NoteState) -> dict:
    decision = state["decision"]
    if decision["decision"] in ("approve", "edit"):
        _write_note(decision["args"], None)
        return {"log": ["executed"]}
    return {"log": [f"skipped:{decision['decision']}"]}


def build_note_graph(*, checkpointer: Any, with_execute: bool = True) -> Any:
    builder = StateGraph(NoteState)
    builder.add_node("propose", _propose)
    builder.add_node("approve", _approve)
    builder.add_edge(START, "propose")
    builder.add_edge("propose", "approve")
    if with_execute:
        builder.add_node("execute", _execute)
        builder.add_edge("approve", "execute")
        builder.add_edge("execute", END)
    else:
        builder.add_edge("approve", END)
    return builder.compile(checkpointer=checkpointer)


class NoteInput(BaseModel):
    topic: str


@pytest.fixture
def note_agent():
    tool_register(
        ToolSpec(
            name="write_note",
            description="Write a note",
            args_model=NoteArgs,
            tier="write",
            run=_write_note,
            blast_radius="one note about {text}",
        )
    )
    CALLS.clear()
    spec = agent_register(
        AgentSpec(name="note_agent", version="1", factory=build_note_graph, input_model=NoteInput)
    )
    yield spec
    agent_unregister("note_agent")
    CALLS.clear()
