"""Fixtures for the remote approval service: the demo policy, an external agent with a key,
and a recorded task queue (the tests run the advance and deliveries themselves)."""

from __future__ import annotations

import pytest

from agents.remote.models import ExternalAgent
from agents.remote.registry import external_agent_key_issue, external_agent_save

# The approvals tests' queue and demo policy, the same here.
from tests.approvals.conftest import _nothing_runs, demo_policy, queue_modules  # noqa: F401


def make_agent(name: str = "billing", **fields) -> ExternalAgent:
    fields.setdefault("callback_url", "https://agent.example/hooks/console")
    return external_agent_save(agent=ExternalAgent(name=name, **fields), actor="system:test")


@pytest.fixture
def agent(db) -> ExternalAgent:
    """An external agent with a registered callback URL (any tool)."""
    return make_agent()


@pytest.fixture
def agent_key(agent) -> str:
    return external_agent_key_issue(agent=agent, actor="system:test")[1]
