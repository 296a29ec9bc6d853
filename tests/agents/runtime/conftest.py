"""The note agent (tests/support/agents.py): one gated tool, to test the runner apart from the
demo agents."""

from __future__ import annotations

import pytest

from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from agents.tools import ToolSpec, tool_register
from tests.support.agents import CALLS, NoteArgs, NoteInput, build_note_graph, write_note


@pytest.fixture
def note_agent():
    tool_register(
        ToolSpec(
            name="write_note",
            description="Write a note",
            args_model=NoteArgs,
            tier="write",
            run=write_note,
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
