"""The metrics rollups: kept by the closing transaction, rebuilt by the backfill, 1% buckets."""

from __future__ import annotations

import datetime as dt
import math
import random
import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.rollup_models import MetricsBucket, MetricsCount, MetricsHistogram
from approvals.rollup_rebuild import rollups_rebuild
from approvals.rollups import (
    ALPHA,
    GAMMA,
    LEVELS,
    TTD_BAR_BOUNDS,
    approval_rollup_add,
    approvals_rollup_add,
    blocks_cover,
    bucket_of,
    bucket_value,
    day_of,
)
from approvals.services import approval_expire, run_mark_cancelled
from console.metrics.definitions import TIME_BUCKETS
from console.metrics.rollup import percentiles_from
from tests.support.approvals import decide, request_approval
from tests.support.factories import ApprovalFactory, RunFactory


def nearest_rank(values: list[float], percent: int) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(percent * len(ordered) / 100)) - 1]


def cells() -> set[tuple]:
    counts = MetricsCount.objects.values_list(
        "level", "block", "dimension", "group_key", "outcome", "n", "escalated", "reminded"
    )
    buckets = MetricsBucket.objects.values_list(
        "level", "block", "dimension", "group_key", "bucket", "n"
    )
    return set(counts) | {("bucket", *row) for row in buckets}


def level0(dimension: str) -> dict[tuple[str, str], int]:
    return {
        (key, outcome): n
        for key, outcome, n in MetricsCount.objects.filter(
            level=0, dimension=dimension
        ).values_list("group_key", "outcome", "n")
    }


# --- buckets and blocks (no database) -----------------------------------------------------------


def test_every_duration_reads_back_within_one_percent():
    rng = random.Random(13)
    for _ in range(20_000):
        seconds = math.exp(rng.uniform(math.log(0.001), math.log(1e7)))
        assert abs(bucket_value(bucket_of(seconds)) - seconds) <= ALPHA * seconds * (1 + 1e-9)
    assert bucket_value(bucket_of(0.0)) == 0.0


@pytest.mark.parametrize("seed", range(8))
def test_histogram_percentiles_are_within_one_percent_of_the_nearest_rank(seed):
    rng = random.Random(seed)
    size = rng.choice([1, 2, 3, 7, 20, 101, 1000, 5000])
    durations = [rng.lognormvariate(math.log(120), 2.0) for _ in range(size)]
    histogram: dict[int, int] = {}
    for seconds in durations:
        histogram[bucket_of(seconds)] = histogram.get(bucket_of(seconds), 0) + 1

    found = percentiles_from(list(histogram.items()))

    for p, value in found.items():
        exact = nearest_rank(durations, p)
        assert abs(value - exact) <= ALPHA * exact * (1 + 1e-9), (p, value, exact)


def test_blocks_cover_any_window_exactly_with_few_blocks():
    rng = random.Random(5)
    for _ in range(2000):
        first = rng.randrange(19_000, 21_000)
        last = first + rng.randrange(0, 365)
        blocks = blocks_cover(first, last)
        days = [d for level, block in blocks for d in range(block << level, (block + 1) << level)]
        assert days == list(range(first, last + 1))
        assert len(blocks) <= 2 * LEVELS


def test_the_time_bars_are_the_pages_time_buckets():
    bounds = [upper.total_seconds() for _, upper in TIME_BUCKETS if upper is not None]
    assert bounds == list(TTD_BAR_BOUNDS)


# --- kept in the closing transaction --------------------------------------------------------


@pytest.mark.django_db
def test_a_decision_counts_once_per_level_in_its_transaction(demo_policy, alice, bob):
    approval = request_approval(requester=alice, tier="write")
    assert not MetricsCount.objects.exists()

    decided = decide(approval, bob)

    assert level0("reviewer") == {("bob", "approve"): 1}
    assert level0("tier") == {("write", "approve"): 1}
    assert level0("tool") == {("refund_order", "approve"): 1}
    day = day_of(decided.created_at)
    assert sorted(
        MetricsCount.objects.filter(dimension="agent").values_list("level", "block", "n")
    ) == [(level, day >> level, 1) for level in range(LEVELS)]
    seconds = (decided.decided_at - decided.created_at).total_seconds()
    assert set(MetricsBucket.objects.filter(level=0).values_list("group_key", "bucket", "n")) == {
        (key, bucket_of(seconds), 1) for key in ("write", "refund_order", decided.run.agent, "bob")
    }


@pytest.mark.django_db
def test_counting_a_closed_approval_takes_two_statements(alice, bob, django_assert_num_queries):
    run = RunFactory(requested_by=alice)
    approval = ApprovalFactory(
        run=run, status="approved", decided_by=bob, decided_after=dt.timedelta(seconds=5)
    )
    approval = ApprovalRequest.objects.select_related("run", "decided_by").get(pk=approval.pk)

    with django_assert_num_queries(2):
        approval_rollup_add(approval=approval)


@pytest.mark.django_db
def test_a_vote_short_of_the_quorum_counts_nothing(demo_policy, alice, bob, carol):
    approval = request_approval(requester=alice, tier="critical")

    decide(approval, bob)
    assert not MetricsCount.objects.exists()
    decide(approval, carol)

    assert level0("reviewer") == {("carol", "approve"): 1}
    assert level0("tier") == {("critical", "approve"): 1}


@pytest.mark.django_db
def test_an_expiry_counts_as_expired_under_system_timeout(demo_policy, alice):
    approval = request_approval(requester=alice, tier="write")

    assert approval_expire(approval_id=approval.id, now=approval.expires_at)

    assert level0("reviewer") == {("system:timeout", "expired"): 1}
    assert not MetricsBucket.objects.exists()  # no person: no time to decision


@pytest.mark.django_db
def test_a_cancelled_run_counts_its_open_approvals_as_expired(demo_policy, alice):
    run = RunFactory(requested_by=alice, status="waiting")
    request_approval(requester=alice, tier="write", run=run)
    request_approval(requester=alice, tier="write", run=run)

    run_mark_cancelled(run=run, user=alice)

    assert level0("reviewer") == {("system:cancel", "expired"): 2}
    assert level0("agent") == {(run.agent, "expired"): 2}


# --- the backfill ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_backfill_rebuilds_exactly_what_the_decisions_wrote(demo_policy, alice, bob, carol):
    for tier, decision, by in [
        ("write", "approve", bob),
        ("write", "reject", bob),
        ("critical", "respond", carol),
    ]:
        approval = request_approval(requester=alice, tier=tier)
        decide(approval, by, decision=decision, message="no" if decision != "approve" else "")
    expired = request_approval(requester=alice, tier="write")
    approval_expire(approval_id=expired.id, now=expired.expires_at)
    request_approval(requester=alice, tier="write")  # pending: not counted
    written = cells()
    assert written

    assert rollups_rebuild(progress=lambda line: None) == 4
    assert cells() == written
    rollups_rebuild(batch=1, progress=lambda line: None)  # again, in tiny batches
    assert cells() == written


@pytest.mark.django_db
def test_the_backfill_command_reports_progress_and_refuses_a_bad_batch(alice, bob, capsys):
    run = RunFactory(requested_by=alice)
    now = timezone.now()
    for days in (3, 2, 2, 1):  # a day's cells are written together, once the stream passed it
        ApprovalFactory(
            run=run,
            status="approved",
            decided_by=bob,
            created_at=now - dt.timedelta(days=days),
            decided_after=dt.timedelta(seconds=days),
        )

    call_command("metrics_backfill", batch=2)

    out = capsys.readouterr().out
    assert "approvals (" in out and "Done: 4 closed approvals counted." in out  # progress
    reviewer = MetricsCount.objects.filter(level=0, dimension="reviewer")
    assert sorted(reviewer.values_list("n", flat=True)) == [1, 1, 2]  # a cell per day
    assert (
        sum(MetricsCount.objects.filter(level=9, dimension="tier").values_list("n", flat=True)) == 4
    )
    with pytest.raises(CommandError, match="--batch"):
        call_command("metrics_backfill", batch=0)


# --- concurrency (Postgres: real concurrent transactions) ------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_closings_of_the_same_cells_lose_no_count(alice, bob):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite runs one write transaction at a time: nothing to race")
    run = RunFactory(requested_by=alice)
    approvals = [
        ApprovalFactory(
            run=run, status="approved", decided_by=bob, decided_after=dt.timedelta(seconds=7)
        )
        for _ in range(8)
    ]
    ids = [approval.pk for approval in approvals]
    start = threading.Barrier(len(ids))
    errors: list[BaseException] = []

    def close(pk: int) -> None:
        try:
            approval = ApprovalRequest.objects.select_related("run", "decided_by").get(pk=pk)
            start.wait()
            with transaction.atomic():
                approval_rollup_add(approval=approval)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=close, args=(pk,)) for pk in ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert level0("reviewer") == {("bob", "approve"): len(ids)}
    assert set(MetricsCount.objects.filter(dimension="tier").values_list("n", flat=True)) == {
        len(ids)
    }


# --- the histogram rows (one JSON object per cell) ---------------------------------------------


@pytest.mark.django_db
def test_one_statement_merges_several_buckets_into_a_stored_histogram(alice, bob):
    run = RunFactory(requested_by=alice)
    now = timezone.now()

    def approval(seconds: float) -> ApprovalRequest:
        made = ApprovalFactory(
            run=run,
            status="approved",
            decided_by=bob,
            created_at=now,
            decided_after=dt.timedelta(seconds=seconds),
        )
        return ApprovalRequest.objects.select_related("run", "decided_by").get(pk=made.pk)

    first = [approval(5), approval(5), approval(60)]
    second = [approval(60), approval(3600)]
    with transaction.atomic():
        approvals_rollup_add(approvals=first)
    with transaction.atomic():
        approvals_rollup_add(approvals=second)

    expected = {bucket_of(5): 2, bucket_of(60): 2, bucket_of(3600): 1}
    reviewer = MetricsHistogram.objects.get(level=0, dimension="reviewer", group_key="bob")
    assert {int(bucket): n for bucket, n in reviewer.counts.items()} == expected
    assert MetricsHistogram.objects.filter(dimension="reviewer").count() == LEVELS  # a row a level
    assert (
        dict(
            MetricsBucket.objects.filter(level=LEVELS - 1, dimension="tier").values_list(
                "bucket", "n"
            )
        )
        == expected
    )


@pytest.mark.django_db
def test_the_backfill_puts_durations_at_bucket_boundaries_where_a_decision_does(alice, bob):
    """On Postgres the backfill computes the bucket in SQL: it must agree with bucket_of."""
    run = RunFactory(requested_by=alice)
    created = timezone.now().replace(microsecond=0)
    for bucket in range(-100, 600, 37):
        for nudge in (-1, 0, 1):  # a microsecond either side of the boundary, and on it
            seconds = round(GAMMA**bucket, 6) + nudge / 1_000_000
            if seconds <= 0:
                continue
            made = ApprovalFactory(
                run=run,
                status="approved",
                decided_by=bob,
                created_at=created,
                decided_after=dt.timedelta(seconds=seconds),
            )
            approval_rollup_add(
                approval=ApprovalRequest.objects.select_related("run", "decided_by").get(pk=made.pk)
            )
    written = cells()

    rollups_rebuild(progress=lambda line: None)

    assert cells() == written
