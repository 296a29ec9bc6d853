"""Registers the agents of tests/support/agents.py as users write them: plain LangChain
``HumanInTheLoopMiddleware`` agents, plain graphs (parallel ``Send`` branches, a question), and
the example helpdesk agent, all driven through the runner."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agents.runtime import registry
from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from tests.support.agents import DELETED, HELPDESK_SETTING, SENT, hitl_factory


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
