"""A fixed set of approvals with explicit timestamps, for the metrics tests.

NOW is the moment the metrics are computed at; the default window (30 days) starts at
2026-02-13 12:00 UTC. Each approval's comment says where it lands.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User

from approvals.models import AgentRun, ApprovalRequest
from tests.support.factories import ApprovalFactory, RunFactory

NOW = dt.datetime(2026, 3, 15, 12, 0, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)
S = dt.timedelta(seconds=1)


@dataclass(frozen=True)
class MetricsData:
    runs: dict[str, AgentRun]


def metrics_data_build(*, now: dt.datetime, requester: User, bob: User, carol: User) -> MetricsData:
    """Twelve approvals in the window (one pending), one pending and one decided before it.

    Person decisions in the window, in seconds: bob 2, 4, 5, 6, 8; carol 30, 120, 300, 600.
    """
    Status = ApprovalRequest.Status

    def started(agent: str, status: str, created_at: dt.datetime) -> AgentRun:
        return RunFactory(requested_by=requester, agent=agent, status=status, created_at=created_at)

    refund = started("refund_agent", "waiting", now - 10 * DAY)
    incident = started("incident_copilot", "completed", now - 10 * DAY)
    started("incident_copilot", "dead", now - DAY)
    started("refund_agent", "failed", now - 40 * DAY)

    def write(tool: str = "refund_order", run: AgentRun = refund, **kwargs: Any) -> None:
        ApprovalFactory(run=run, tier="write", tool=tool, **kwargs)

    def critical(**kwargs: Any) -> None:
        ApprovalFactory(run=incident, tier="critical", tool="rollback_deploy", **kwargs)

    timeout = "system:timeout"  # the label of decisions no person made
    # write / refund_order / refund_agent
    write(created_at=now - 2 * DAY, status=Status.APPROVED, decided_by=bob, decided_after=5 * S)
    write(created_at=now - 2 * DAY, status=Status.APPROVED, decided_by=bob, decided_after=8 * S)
    write(created_at=now - 3 * DAY, status=Status.APPROVED, decided_by=bob, decided_after=4 * S)
    write(created_at=now - 3 * DAY, status=Status.APPROVED, decided_by=bob, decided_after=6 * S)
    write(created_at=now - 4 * DAY, status=Status.EDITED, decided_by=carol, decided_after=120 * S)
    write(created_at=now - 5 * DAY, status=Status.REJECTED, decided_by=carol, decided_after=300 * S)
    # critical / rollback_deploy / incident_copilot
    critical(created_at=now - DAY, status=Status.APPROVED, decided_by=carol, decided_after=30 * S)
    critical(created_at=now - DAY, status=Status.RESPONDED, decided_by=carol, decided_after=600 * S)
    critical(
        created_at=now - 6 * DAY, status=Status.EXPIRED, decided_by_label=timeout, decided_after=DAY
    )  # expired, decided 2026-03-10
    critical(
        created_at=now - 7 * DAY,
        status=Status.APPROVED,
        decided_by_label=timeout,
        decided_after=dt.timedelta(hours=1),
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
        decided_after=2 * S,
        reminded=True,
    )
    write(
        tool="create_incident_ticket",
        run=incident,
        created_at=now - 31 * DAY,
        status=Status.APPROVED,
        decided_by=bob,
        decided_after=1 * S,
    )  # before the window
    return MetricsData(runs={"refund": refund, "incident": incident})
