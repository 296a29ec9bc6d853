"""The report from the rollups: the figures of the rows, percentiles within 1%, few queries."""

from __future__ import annotations

import datetime as dt
import math
import random

import pytest
import time_machine
from django.contrib.auth.models import User

from approvals.rollup_rebuild import rollups_rebuild
from approvals.rollups import ALPHA
from console.metrics.definitions import GROUPS, PERCENTILES, MetricsRow
from console.metrics.report import _rows_by_group, metrics_report
from console.metrics.rollup import day_range, day_start
from tests.support.approvals import decide, request_approval
from tests.support.factories import ApprovalFactory, RunFactory
from tests.support.metrics import NOW
from tests.support.people import client_for as page_client
from tests.support.people import rest_client_for as api_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def rollups_only(settings):
    settings.METRICS_EXACT_MAX_REQUESTS = 0


def nearest_rank(values: list[float], percent: int) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(percent * len(ordered) / 100)) - 1]


def counts(row: MetricsRow) -> tuple:
    return (row.key, row.requests, row.pending, row.outcomes, row.escalated, row.reminded)


def assert_close(found: dict[int, float | None], exact: dict[int, float | None]) -> None:
    for p in PERCENTILES:
        if exact[p] is None:
            assert found[p] is None
        else:
            assert abs(found[p] - exact[p]) <= ALPHA * exact[p] * (1 + 1e-9), (p, found, exact)


def exact_rows(*, window_days: int, now: dt.datetime) -> dict[str | None, list[MetricsRow]]:
    """The rows' exact figures over the rollups' window (whole UTC days up to ``now``)."""
    first, _ = day_range(window_days=window_days, now=now)
    return _rows_by_group(groups=(*GROUPS, None), since=day_start(first), now=now)


@pytest.mark.parametrize("window_days", [1, 7, 30, 90, 365])
def test_the_rollups_give_the_rows_figures_on_the_fixture_set(
    metrics_data, rollups_only, window_days
):
    rollups_rebuild(progress=lambda line: None)
    exact = exact_rows(window_days=window_days, now=NOW)

    for group in GROUPS:
        report = metrics_report(window_days=window_days, group=group, now=NOW)
        assert not report.exact
        expected = {row.key: row for row in exact[group]}
        rows = {row.key: row for row in report.rows if row.requests}
        assert sorted(map(counts, rows.values())) == sorted(map(counts, expected.values()))
        for key, row in rows.items():
            assert_close(row.percentiles, expected[key].percentiles)
    [total] = exact[None]
    assert counts(report.total) == counts(total)
    assert_close(report.total.percentiles, total.percentiles)


def test_fatigue_and_the_charts_match_the_exact_report(metrics_data, rollups_only, settings):
    rollups_rebuild(progress=lambda line: None)
    settings.METRICS_EXACT_MAX_REQUESTS = 1000
    exact = metrics_report(now=NOW)
    settings.METRICS_EXACT_MAX_REQUESTS = 0

    report = metrics_report(now=NOW)

    assert exact.exact and not report.exact
    assert [(f.dimension, f.key, f.approve_rate, f.decisions) for f in report.fatigue] == [
        (f.dimension, f.key, f.approve_rate, f.decisions) for f in exact.fatigue
    ]
    assert report.time_to_decision == exact.time_to_decision
    # 30 whole days against the rolling window's 31 dates (its first is a half day, empty here)
    assert report.decisions_per_day == exact.decisions_per_day[1:]
    assert report.queue_age == exact.queue_age
    assert report.since == dt.datetime(2026, 2, 14, tzinfo=dt.UTC)  # 30 whole days, today too


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_percentiles_from_the_rollups_are_within_one_percent_on_generated_data(rollups_only, seed):
    rng = random.Random(seed)
    reviewers = [User.objects.create_user(f"reviewer{n}") for n in range(3)]
    requester = User.objects.create_user("requester")
    runs = [RunFactory(requested_by=requester, agent=agent) for agent in ("a1", "a2")]
    durations: dict[tuple[str, str], list[float]] = {}
    for _ in range(rng.randrange(50, 250)):
        reviewer, run = rng.choice(reviewers), rng.choice(runs)
        tool, tier = rng.choice([("refund_order", "write"), ("delete_account", "critical")])
        seconds = rng.lognormvariate(math.log(60), 1.8)
        ApprovalFactory(
            run=run,
            tool=tool,
            tier=tier,
            status=rng.choice(["approved", "edited", "rejected", "responded"]),
            decided_by=reviewer,
            created_at=NOW - dt.timedelta(days=rng.randrange(0, 20), hours=rng.random()),
            decided_after=dt.timedelta(seconds=seconds),
        )
        keys = {"tier": tier, "tool": tool, "agent": run.agent, "reviewer": reviewer.username}
        for group, key in (*keys.items(), ("total", "")):
            durations.setdefault((group, key), []).append(seconds)
    rollups_rebuild(progress=lambda line: None)

    for group in GROUPS:
        report = metrics_report(window_days=30, group=group, now=NOW + dt.timedelta(hours=11))
        assert {row.key for row in report.rows} == {k for g, k in durations if g == group}
        for row in report.rows:
            values = durations[group, row.key]
            assert row.person_decisions == len(values)
            assert_close(row.percentiles, {p: nearest_rank(values, p) for p in PERCENTILES})
    assert_close(
        report.total.percentiles, {p: nearest_rank(durations["total", ""], p) for p in PERCENTILES}
    )


def test_a_decision_shows_on_the_report_at_once(demo_policy, alice, bob, rollups_only):
    approval = request_approval(requester=alice, tier="write")
    before = metrics_report(window_days=1).total
    assert (before.requests, before.pending, before.closed) == (1, 1, 0)

    decide(approval, bob)

    after = metrics_report(window_days=1).total
    assert (after.requests, after.pending, after.outcomes["approve"]) == (1, 0, 1)


def test_a_report_from_the_rollups_takes_a_few_queries(
    metrics_data, rollups_only, django_assert_max_num_queries
):
    rollups_rebuild(progress=lambda line: None)
    for group in GROUPS:
        # probe, rows, buckets, the pending cells (the window's and the queue's depths, kept
        # by triggers: approvals/rollup_pending.py), the oldest pending per key (one query),
        # queue age, time bars, per day, runs; Postgres: SAVEPOINT, 2 x SET LOCAL, RELEASE.
        # (18 before: the window's pending and the queue per grouping and in all were counted
        # live, three queries.) Each reviewer's canary catch rate (approvals/canary_selectors.py):
        # one query more.
        with django_assert_max_num_queries(14):
            metrics_report(window_days=365, group=group, now=NOW)


def test_the_page_and_the_api_say_the_percentiles_are_within_one_percent(
    metrics_data, rollups_only, erin
):
    rollups_rebuild(progress=lambda line: None)
    with time_machine.travel(NOW, tick=False):
        page = page_client(erin).get("/metrics/")
        body = api_client(erin).get("/api/metrics/").json()

    assert page.status_code == 200
    text = page.content.decode()
    assert "percentiles within 1%" in text and "whole days, UTC" in text
    assert (body["exact"], body["percentile_relative_error"]) == (False, ALPHA)
    assert body["total"]["requests"] == 12


def test_a_small_window_stays_exact(metrics_data, erin):
    with time_machine.travel(NOW, tick=False):
        text = page_client(erin).get("/metrics/").content.decode()
        body = api_client(erin).get("/api/metrics/").json()

    assert "within 1%" not in text
    assert (body["exact"], body["percentile_relative_error"]) == (True, 0.0)
