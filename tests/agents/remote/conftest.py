"""Fixtures for the remote approval service: the demo policy, an external agent with a key,
and a recorded task queue (the tests run the advance and deliveries themselves)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from agents.remote.models import ExternalAgent
from agents.remote.registry import external_agent_key_issue, external_agent_save
from approvals.services import policy_seed_demo
from tests.support.queue import NOTIFICATION_MODULES, RUNNER_MODULES


@pytest.fixture(autouse=True)
def _nothing_runs(queued):
    """Every task these tests enqueue is recorded on ``queued`` (tests.support.queue)."""
    return queued


@pytest.fixture
def queue_modules():
    return (*RUNNER_MODULES, *NOTIFICATION_MODULES)


@pytest.fixture
def demo_policy(db, alice, bob, carol, dave) -> dict[str, Group]:
    """Tiers read / write / critical as seeded for `make run`, with the demo people's groups."""
    policy_seed_demo()
    groups = {g.name: g for g in Group.objects.all()}
    bob.groups.add(groups["approvers-write"])
    carol.groups.add(groups["approvers-write"], groups["approvers-critical"])
    return groups


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
