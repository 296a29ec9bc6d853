"""Fixtures for the approvals tests: a recorded task queue (notification deliveries included),
the demo policy with the demo people in its groups, and alice's refund as the pages show it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from approvals.models import AgentRun, ApprovalRequest
from approvals.services import policy_seed_demo
from tests.support.pages import PageApprovalFactory, PageRunFactory
from tests.support.queue import NOTIFICATION_MODULES, RUNNER_MODULES


@pytest.fixture(autouse=True)
def _nothing_runs(queued):
    """Every task these tests enqueue is recorded on ``queued`` (tests.support.queue)."""
    return queued


@pytest.fixture
def queue_modules():
    """Notification deliveries are recorded too."""
    return (*RUNNER_MODULES, *NOTIFICATION_MODULES)


@pytest.fixture
def demo_policy(db, alice, bob, carol, dave) -> dict[str, Group]:
    """Tiers read / write / critical as seeded for `make run`, with the demo people's groups."""
    policy_seed_demo()
    groups = {g.name: g for g in Group.objects.all()}
    bob.groups.add(groups["approvers-write"])
    carol.groups.add(groups["approvers-write"], groups["approvers-critical"])
    return groups


@pytest.fixture
def run_of_alice(alice: User) -> AgentRun:
    """Alice's waiting refund run (tests/support/pages.py)."""
    return PageRunFactory(requested_by=alice)


@pytest.fixture
def approval(run_of_alice: AgentRun) -> ApprovalRequest:
    """The pending refund_payment approval of alice's run, as the pages show it."""
    return PageApprovalFactory(run=run_of_alice)
