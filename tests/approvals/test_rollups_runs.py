"""Runs by status per creation day: kept by triggers, folded by the compaction, rebuilt."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.models import AgentRun
from approvals.rollup_models import RunStatusCount, RunStatusDelta
from approvals.rollup_rebuild import rollups_rebuild
from approvals.rollup_runs import run_status_compact, runs_by_status_days
from approvals.rollups import day_of
from console.metrics.report import metrics_report
from tests.support.factories import RunFactory

NOW = dt.datetime(2026, 3, 15, 12, 0, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)
STATUSES = AgentRun.Status.values


def live(first: int, last: int) -> dict[str, int]:
    """The runs created on days first..last, counted from the runs table."""
    counts = dict.fromkeys(STATUSES, 0)
    for run in AgentRun.objects.all():
        if first <= day_of(run.created_at) <= last:
            counts[run.status] += 1
    return counts


@pytest.fixture
def kept():
    """runs_by_status_days less what it said before the test: on SQLite a transactional test's
    flush (DELETE FROM each table, in no fixed order) can leave the deltas of its deleted runs
    behind; on Postgres the flush truncates and this baseline is zero."""
    before = {}

    def read(first: int, last: int) -> dict[str, int]:
        if (first, last) not in before:
            raise AssertionError("take the baseline first: kept.baseline(first, last)")
        now = runs_by_status_days(first=first, last=last)
        return {status: now[status] - before[first, last][status] for status in STATUSES}

    def baseline(first: int, last: int) -> None:
        before[first, last] = runs_by_status_days(first=first, last=last)

    read.baseline = baseline
    return read


def churn(rng: random.Random, alice, count: int = 40) -> list[AgentRun]:
    """Runs over 20 days (a few a microsecond either side of midnight UTC), then status
    changes by save() and by queryset update(), a moved creation time and deletions."""
    midnight = dt.datetime(2026, 3, 10, tzinfo=dt.UTC)
    moments = [midnight - dt.timedelta(microseconds=1), midnight]
    moments += [NOW - rng.random() * 20 * DAY for _ in range(count - len(moments))]
    runs = [
        RunFactory(requested_by=alice, status=rng.choice(STATUSES), created_at=moment)
        for moment in moments
    ]
    for run in rng.sample(runs, 15):
        run.status = rng.choice(STATUSES)
        run.save(update_fields=["status"])
    AgentRun.objects.filter(pk__in=[run.pk for run in runs[:10]]).update(status="completed")
    AgentRun.objects.filter(pk=runs[11].pk).update(created_at=NOW - 3 * DAY)
    AgentRun.objects.filter(pk__in=[runs[12].pk, runs[13].pk]).delete()
    return runs


@pytest.mark.django_db
def test_the_counts_follow_inserts_updates_and_deletes_before_and_after_compaction(alice, kept):
    first, last = day_of(NOW - 25 * DAY), day_of(NOW)
    windows = [(first, last), (day_of(NOW - 5 * DAY), last), (day_of(NOW - DAY * 5), last - 2)]
    for window in windows:
        kept.baseline(*window)
    churn(random.Random(7), alice)
    assert RunStatusDelta.objects.exists()
    for window in windows:
        assert kept(*window) == live(*window)

    assert run_status_compact() is True

    assert not RunStatusDelta.objects.exists()
    assert RunStatusCount.objects.exists()
    for window in windows:
        assert kept(*window) == live(*window)
    # More changes after a compaction land in new deltas, summed with the folded counts.
    AgentRun.objects.filter(status="waiting").update(status="failed")
    run_status_compact()
    AgentRun.objects.filter(status="queued").update(status="dead")
    for window in windows:
        assert kept(*window) == live(*window)


@pytest.mark.django_db
def test_a_run_either_side_of_midnight_utc_counts_on_its_own_day(alice, kept):
    midnight = dt.datetime(2026, 3, 10, tzinfo=dt.UTC)
    day = day_of(midnight)
    kept.baseline(day - 1, day - 1)
    kept.baseline(day, day)
    RunFactory(
        requested_by=alice, status="waiting", created_at=midnight - dt.timedelta(microseconds=1)
    )
    RunFactory(requested_by=alice, status="completed", created_at=midnight)

    assert kept(day - 1, day - 1)["waiting"] == 1
    assert kept(day - 1, day - 1)["completed"] == 0
    assert kept(day, day)["completed"] == 1
    assert kept(day, day)["waiting"] == 0


@pytest.mark.django_db
def test_the_backfill_counts_the_runs_again_from_the_table(alice):
    churn(random.Random(11), alice)
    first, last = day_of(NOW - 25 * DAY), day_of(NOW)
    RunStatusCount.objects.create(day=first + 3, status="running", n=999)  # a wrong count
    RunStatusDelta.objects.create(day=first + 3, status="running", n=1)

    rollups_rebuild(progress=lambda line: None)

    assert not RunStatusDelta.objects.exists()
    assert runs_by_status_days(first=first, last=last) == live(first, last)
    stored = Counter()
    for status, n in RunStatusCount.objects.values_list("status", "n"):
        stored[status] += n
    assert sum(stored.values()) == AgentRun.objects.count()


@pytest.mark.django_db
def test_the_rollup_report_counts_runs_without_reading_the_runs_table(alice):
    churn(random.Random(3), alice)
    first, last = day_of(NOW - 29 * DAY), day_of(NOW)
    rollups_rebuild(progress=lambda line: None)  # from the runs alone (see kept())

    with CaptureQueriesContext(connection) as captured:
        report = metrics_report(window_days=30, now=NOW, source="rollups")

    assert report.runs_by_status == live(first, last)
    from_runs = [q["sql"] for q in captured if 'FROM "approvals_agentrun"' in q["sql"]]
    assert from_runs == []
