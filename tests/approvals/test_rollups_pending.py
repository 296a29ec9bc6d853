"""Pending approvals per creation day, tier, tool and agent: kept by triggers, folded by the
compaction, rebuilt by the backfill, read by the report instead of counting the queue live."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals import services as approval_services
from approvals.models import ApprovalRequest
from approvals.rollup_models import PendingApprovalCount, PendingApprovalDelta
from approvals.rollup_pending import pending_cells, pending_compact
from approvals.rollup_rebuild import rollups_rebuild
from approvals.rollups import day_of
from console.metrics.definitions import GROUPS
from console.metrics.report import metrics_report
from core.sealed_fields import field_seal
from tests.support.approvals import decide, request_approval
from tests.support.factories import ApprovalFactory, RunFactory

NOW = dt.datetime(2026, 3, 15, 12, 0, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)
PENDING = ApprovalRequest.Status.PENDING


def live() -> Counter:
    """The pending approvals counted from the table: (day, tier, tool, agent) -> (n, e, r)."""
    found: Counter = Counter()
    for approval in ApprovalRequest.objects.filter(status=PENDING).select_related("run"):
        cell = (day_of(approval.created_at), approval.tier, approval.tool, approval.run.agent)
        found[cell, "n"] += 1
        found[cell, "escalated"] += approval.escalated_at is not None
        found[cell, "reminded"] += approval.reminded_at is not None
    return +found  # drop the zeros


def kept_now() -> Counter:
    found: Counter = Counter()
    for day, tier, tool, agent, n, escalated, reminded in pending_cells():
        cell = (day, tier, tool, agent)
        found[cell, "n"] += n
        found[cell, "escalated"] += escalated
        found[cell, "reminded"] += reminded
    return found


@pytest.fixture
def kept():
    """pending_cells() less what they said before the test: on SQLite a transactional test's
    flush (DELETE FROM each table, in no fixed order) can leave deltas behind (as for the runs
    by status, tests/approvals/test_rollups_runs.py)."""
    before = kept_now()

    def read() -> Counter:
        found = kept_now()
        found.subtract(before)
        return +found

    return read


def churn(rng: random.Random, alice) -> list[ApprovalRequest]:
    """Pending approvals over 20 days, two agents, three tiers, two tools (two a microsecond
    either side of midnight UTC), then every kind of change a pending approval goes through."""
    runs = [RunFactory(requested_by=alice, agent=agent) for agent in ("refund_agent", "ops_agent")]
    midnight = dt.datetime(2026, 3, 10, tzinfo=dt.UTC)
    moments = [midnight - dt.timedelta(microseconds=1), midnight]
    moments += [NOW - rng.random() * 20 * DAY for _ in range(40)]
    approvals = [
        ApprovalFactory(
            run=rng.choice(runs),
            created_at=moment,
            tier=rng.choice(["read", "write", "critical"]),
            tool=rng.choice(["refund_order", "rollback_deploy"]),
        )
        for moment in moments
    ]
    ApprovalFactory(run=runs[0], status=ApprovalRequest.Status.APPROVED)  # never pending
    pick = rng.sample(approvals, len(approvals))
    for approval in pick[:5]:  # decided, by save()
        approval.status = ApprovalRequest.Status.APPROVED
        approval.save(update_fields=["status"])
    ids = [approval.pk for approval in pick[5:10]]
    ApprovalRequest.objects.filter(pk__in=ids[:2]).update(status="expired")  # the sweep
    ApprovalRequest.objects.filter(pk__in=ids[2:]).update(status="rejected")  # a cancel
    ApprovalRequest.objects.filter(pk__in=[a.pk for a in pick[10:14]]).update(escalated_at=NOW)
    ApprovalRequest.objects.filter(pk__in=[a.pk for a in pick[12:17]]).update(reminded_at=NOW)
    ApprovalRequest.objects.filter(pk=pick[13].pk).update(escalated_at=None)
    ApprovalRequest.objects.filter(pk=pick[17].pk).update(tier="critical", tool="other_tool")
    ApprovalRequest.objects.filter(pk=pick[18].pk).update(created_at=NOW - 3 * DAY)
    ApprovalRequest.objects.filter(pk=pick[19].pk).update(run=runs[1])
    ApprovalRequest.objects.filter(pk__in=[pick[20].pk, pick[3].pk]).delete()
    sealed = field_seal(ApprovalRequest, "args", pick[21].run_id, {"x": 1})
    ApprovalRequest.objects.filter(pk=pick[21].pk).update(args=sealed)  # not a cell change
    return approvals


@pytest.mark.django_db
def test_the_pending_counts_follow_every_change_before_and_after_compaction(alice, kept):
    churn(random.Random(5), alice)
    assert PendingApprovalDelta.objects.exists()
    assert kept() == live()

    assert pending_compact() is True

    assert not PendingApprovalDelta.objects.exists()
    assert kept() == live()
    # A cell whose approvals all closed is dropped by the compaction, not kept at zero.
    assert not PendingApprovalCount.objects.filter(n=0).exists()
    ApprovalRequest.objects.filter(tier="read").update(status="approved")
    pending_compact()
    ApprovalRequest.objects.filter(tier="write").update(reminded_at=None)
    assert kept() == live()
    assert not PendingApprovalCount.objects.filter(tier="read").exists()


@pytest.mark.django_db
def test_decisions_expiries_and_cancels_through_the_services_leave_the_counts_right(
    demo_policy, alice, bob, kept
):
    approvals = [request_approval(requester=alice, tier="write") for _ in range(4)]
    assert kept() == live() and live()
    decide(approvals[0], bob)
    approval_services.run_mark_cancelled(run=approvals[1].run, user=alice)
    with time_machine.travel(dt.datetime.now(dt.UTC) + dt.timedelta(hours=3)):
        approval_services.approvals_sweep()  # escalates, reminds, expires the rest
    assert not ApprovalRequest.objects.filter(status=PENDING).exists()
    assert kept() == live() == Counter()


@pytest.mark.django_db
def test_the_backfill_counts_the_pending_approvals_again(alice):
    churn(random.Random(9), alice)
    PendingApprovalCount.objects.create(day=1, tier="write", tool="t", agent="a", n=7)
    PendingApprovalDelta.objects.create(
        day=2, tier="write", tool="t", agent="a", n=1, escalated=0, reminded=0
    )

    rollups_rebuild(progress=lambda line: None)

    assert not PendingApprovalDelta.objects.exists()
    assert kept_now() == live()


@pytest.mark.django_db
def test_the_rollup_report_reads_the_pending_approvals_from_the_counts(alice):
    churn(random.Random(3), alice)
    rollups_rebuild(progress=lambda line: None)  # from the table alone (see kept())
    ApprovalFactory(run=RunFactory(requested_by=alice, agent="late_agent"), created_at=NOW)

    for group in GROUPS:
        exact = metrics_report(window_days=30, group=group, now=NOW, source="rows")
        with CaptureQueriesContext(connection) as captured:
            report = metrics_report(window_days=30, group=group, now=NOW, source="rollups")

        def queue(r):
            return sorted(
                (row.key, row.pending, row.queue_depth, row.oldest_pending_at)
                for row in [r.total, *r.rows]
            )

        assert queue(report) == queue(exact)
        assert [b.count for b in report.queue_age] == [b.count for b in exact.queue_age]
        # No query counts the pending approvals probing each one's run for its agent.
        probes = [
            q["sql"]
            for q in captured
            if "COUNT(" in q["sql"] and 'JOIN "approvals_agentrun"' in q["sql"]
        ]
        assert probes == []


def test_a_flush_leaves_no_pending_count_behind(transactional_db, alice):
    # SQLite's flush deletes table by table in no fixed order: the deltas of the approvals it
    # deletes after the delta table would be left; post_migrate (which flush emits) counts again.
    from django.core.management import call_command

    ApprovalFactory.create_batch(3, run=RunFactory(requested_by=alice))
    assert pending_cells()

    call_command("flush", interactive=False, verbosity=0)

    assert pending_cells() == []
