"""An upgraded database gets the metrics rollups of the approvals it already holds."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from approvals.models import ApprovalRequest
from approvals.rollup_models import MetricsCount
from tests.support.factories import ApprovalFactory

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("approvals", "0015_due_indexes")]
AFTER = [("approvals", "0016_metrics_rollup_fill")]


def migrate(targets: list[tuple[str, str]]) -> None:
    MigrationExecutor(connection).migrate(targets)


# The rows are written before the database is taken back to the older schema: the factories
# write today's columns (``erased_at`` came later), and the rows outlive the reversal.


def test_approvals_decided_before_the_upgrade_are_counted_by_the_migration(bob):
    ApprovalFactory.create_batch(
        3,
        status=ApprovalRequest.Status.APPROVED,
        decided_by=bob,
        decided_after=dt.timedelta(minutes=2),
    )
    ApprovalFactory()  # pending: not a decision
    migrate(BEFORE)
    try:
        MetricsCount.objects.all().delete()  # the factory writes no rollups; be sure of it

        migrate(AFTER)
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    by_reviewer = MetricsCount.objects.filter(level=0, dimension="reviewer", group_key="bob")
    assert sum(row.n for row in by_reviewer.filter(outcome="approve")) == 3


def test_approvals_pending_before_the_upgrade_are_counted_by_the_migration(alice):
    from approvals.rollup_models import PendingApprovalCount

    ApprovalFactory.create_batch(2, escalated=True)  # pending
    ApprovalFactory(status=ApprovalRequest.Status.REJECTED)  # closed: not counted
    migrate([("approvals", "0017_h2_run_status_counts")])
    try:
        migrate([("approvals", "0018_h6_pending_approval_counts")])
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    cells = PendingApprovalCount.objects.values_list("tier", "tool", "agent", "n", "escalated")
    assert list(cells) == [("write", "refund_order", "refund_agent", 2, 2)]
