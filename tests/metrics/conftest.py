"""A fixed set of approvals with explicit timestamps, and a manager (erin).

NOW is the moment the metrics are computed at; the default window (30 days) starts at
2026-02-13 12:00 UTC. Each approval's comment says where it lands.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Group, User

from approvals.models import AgentRun, ApprovalRequest

NOW = dt.datetime(2026, 3, 15, 12, 0, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)
S = dt.timedelta(seconds=1)


@pytest.fixture
def erin(db) -> User:
    """A manager: member of the "managers" group that console's migration creates."""
    user = User.objects.create_user(username="erin", password="demo", email="erin@example.com")
    user.groups.add(Group.objects.get(name="managers"))
    return user


def run_create(*, requester: User, agent: str, status: str, created_at: dt.datetime) -> AgentRun:
    run_id = uuid.uuid4()
    run = AgentRun.objects.create(
        id=run_id,
        thread_id=str(run_id),
        agent=agent,
        graph_version="1",
        status=status,
        requested_by=requester,
    )
    AgentRun.objects.filter(pk=run.pk).update(created_at=created_at)
    return run


def approval_create(
    *,
    run: AgentRun,
    tier: str,
    tool: str,
    created_at: dt.datetime,
    status: str = ApprovalRequest.Status.PENDING,
    decided_by: User | None = None,
    label: str = "",
    after: dt.timedelta | None = None,
    escalated: bool = False,
    reminded: bool = False,
) -> ApprovalRequest:
    approval = ApprovalRequest.objects.create(
        run=run,
        interrupt_id=uuid.uuid4().hex,
        tool=tool,
        tier=tier,
        payload_hash="0" * 64,
        status=status,
        decided_by=decided_by,
        decided_by_label=decided_by.username if decided_by else label,
        expires_at=created_at + DAY,
    )
    # created_at is auto_now_add: set the fixed timestamps afterwards.
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        created_at=created_at,
        decided_at=created_at + after if after is not None else None,
        escalated_at=created_at + S if escalated else None,
        reminded_at=created_at + S if reminded else None,
    )
    return approval


@dataclass(frozen=True)
class MetricsData:
    runs: dict[str, AgentRun]


@pytest.fixture
def metrics_data(alice, bob, carol) -> MetricsData:
    return metrics_data_build(now=NOW, requester=alice, bob=bob, carol=carol)


def metrics_data_build(*, now: dt.datetime, requester: User, bob: User, carol: User) -> MetricsData:
    """Twelve approvals in the window (one pending), one pending and one decided before it.

    Person decisions in the window, in seconds: bob 2, 4, 5, 6, 8; carol 30, 120, 300, 600.
    """
    Status = ApprovalRequest.Status
    refund = run_create(
        requester=requester, agent="refund_agent", status="waiting", created_at=now - 10 * DAY
    )
    incident = run_create(
        requester=requester, agent="incident_copilot", status="completed", created_at=now - 10 * DAY
    )
    run_create(requester=requester, agent="incident_copilot", status="dead", created_at=now - DAY)
    run_create(
        requester=requester, agent="refund_agent", status="failed", created_at=now - 40 * DAY
    )

    def write(tool: str = "refund_order", run: AgentRun = refund, **kwargs) -> None:
        approval_create(run=run, tier="write", tool=tool, **kwargs)

    def critical(**kwargs) -> None:
        approval_create(run=incident, tier="critical", tool="rollback_deploy", **kwargs)

    # write / refund_order / refund_agent
    write(created_at=now - 2 * DAY, status=Status.APPROVED, decided_by=bob, after=5 * S)
    write(created_at=now - 2 * DAY, status=Status.APPROVED, decided_by=bob, after=8 * S)
    write(created_at=now - 3 * DAY, status=Status.APPROVED, decided_by=bob, after=4 * S)
    write(created_at=now - 3 * DAY, status=Status.APPROVED, decided_by=bob, after=6 * S)
    write(created_at=now - 4 * DAY, status=Status.EDITED, decided_by=carol, after=120 * S)
    write(created_at=now - 5 * DAY, status=Status.REJECTED, decided_by=carol, after=300 * S)
    # critical / rollback_deploy / incident_copilot
    critical(created_at=now - DAY, status=Status.APPROVED, decided_by=carol, after=30 * S)
    critical(created_at=now - DAY, status=Status.RESPONDED, decided_by=carol, after=600 * S)
    critical(
        created_at=now - 6 * DAY, status=Status.EXPIRED, label="system:timeout", after=DAY
    )  # expired, decided 2026-03-10
    critical(
        created_at=now - 7 * DAY,
        status=Status.APPROVED,
        label="system:timeout",
        after=dt.timedelta(hours=1),
    )  # the tier's default on expiry was approve: still no person, so it counts as expired
    critical(created_at=now - 3 * dt.timedelta(hours=1), escalated=True, reminded=True)
    critical(created_at=now - 40 * DAY)  # pending since before the window: the oldest
    # write / create_incident_ticket / incident_copilot
    write(
        tool="create_incident_ticket",
        run=incident,
        created_at=now - DAY,
        status=Status.APPROVED,
        decided_by=bob,
        after=2 * S,
        reminded=True,
    )
    write(
        tool="create_incident_ticket",
        run=incident,
        created_at=now - 31 * DAY,
        status=Status.APPROVED,
        decided_by=bob,
        after=1 * S,
    )  # before the window
    return MetricsData(runs={"refund": refund, "incident": incident})
