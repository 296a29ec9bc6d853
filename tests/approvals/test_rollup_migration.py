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


def approvals_as_of(target: list[tuple[str, str]], count: int = 1, **attrs) -> None:
    """Approvals (and their runs) written as the schema of ``target`` stood: through its
    historical models, so columns added since (and fields sealed since) play no part."""
    state = MigrationExecutor(connection).loader.project_state(target).apps
    for _ in range(count):
        approval = ApprovalFactory.build(**attrs)
        for row in (approval.run, approval):
            model = state.get_model(row._meta.label)
            names = {f.attname for f in model._meta.concrete_fields}
            model.objects.create(
                **{
                    f.attname: getattr(row, f.attname)
                    for f in row._meta.concrete_fields
                    if f.attname in names
                }
            )


def test_approvals_decided_before_the_upgrade_are_counted_by_the_migration(bob):
    migrate(BEFORE)
    try:
        approvals_as_of(
            BEFORE,
            3,
            status=ApprovalRequest.Status.APPROVED,
            decided_by=bob,
            decided_after=dt.timedelta(minutes=2),
            run__requested_by=bob,
        )
        approvals_as_of(BEFORE, run__requested_by=bob)  # pending: not a decision
        MetricsCount.objects.all().delete()  # the factory writes no rollups; be sure of it

        migrate(AFTER)
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    by_reviewer = MetricsCount.objects.filter(level=0, dimension="reviewer", group_key="bob")
    assert sum(row.n for row in by_reviewer.filter(outcome="approve")) == 3


def test_approvals_pending_before_the_upgrade_are_counted_by_the_migration(alice):
    from approvals.rollup_models import PendingApprovalCount

    before = [("approvals", "0017_h2_run_status_counts")]
    migrate(before)
    try:
        approvals_as_of(before, 2, escalated=True, run__requested_by=alice)  # pending
        # closed: not counted
        approvals_as_of(before, status=ApprovalRequest.Status.REJECTED, run__requested_by=alice)

        migrate([("approvals", "0018_h6_pending_approval_counts")])
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    cells = PendingApprovalCount.objects.values_list("tier", "tool", "agent", "n", "escalated")
    assert list(cells) == [("write", "refund_order", "refund_agent", 2, 2)]
