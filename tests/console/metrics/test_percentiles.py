"""The database's percentiles equal a nearest-rank reference on Postgres and SQLite alike."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from approvals.models import ApprovalRequest
from console.metrics.report import metrics_report
from tests.support.factories import ApprovalFactory, RunFactory
from tests.support.metrics import NOW

pytestmark = pytest.mark.django_db


def nearest_rank(values: list[float], percent: int) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(percent * len(ordered) / 100)) - 1]


@pytest.mark.parametrize("size", [1, 2, 3, 10, 19, 20, 21, 40])
def test_percentiles_match_the_reference_for_each_size(alice, bob, size):
    run = RunFactory(requested_by=alice, agent="refund_agent", status="waiting", created_at=NOW)
    # Distinct, unordered durations with sub-second parts.
    durations = [((index * 7919) % 1000) + index / 1000 for index in range(size)]
    for seconds in durations:
        ApprovalFactory(
            run=run,
            tier="write",
            tool="refund_order",
            created_at=NOW - dt.timedelta(days=1),
            status=ApprovalRequest.Status.APPROVED,
            decided_by=bob,
            decided_after=dt.timedelta(seconds=seconds),
        )

    total = metrics_report(now=NOW).total

    expected = {p: nearest_rank(durations, p) for p in (50, 90, 95)}
    assert total.percentiles == pytest.approx(expected, abs=1e-6)
