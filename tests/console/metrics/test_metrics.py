"""Exact counts, rates and percentiles of console.metrics on the fixed fixture set."""

from __future__ import annotations

import datetime as dt
from fractions import Fraction

import pytest

from console.metrics.definitions import MetricsRow
from console.metrics.report import metrics_report
from tests.support.metrics import DAY, NOW

pytestmark = pytest.mark.django_db


def rows_by_key(group: str) -> dict[str, MetricsRow]:
    return {row.key: row for row in metrics_report(group=group, now=NOW).rows}


def outcomes(approve=0, edit=0, reject=0, respond=0, expired=0) -> dict[str, int]:
    return {
        "approve": approve,
        "edit": edit,
        "reject": reject,
        "respond": respond,
        "expired": expired,
    }


def test_the_whole_window_counts_twelve_requests_and_their_outcomes(metrics_data):
    total = metrics_report(now=NOW).total

    assert (total.requests, total.pending, total.closed) == (12, 1, 11)
    assert total.outcomes == outcomes(approve=6, edit=1, reject=1, respond=1, expired=2)
    assert total.rates == {
        "approve": 6 / 11,
        "edit": 1 / 11,
        "reject": 1 / 11,
        "respond": 1 / 11,
        "expired": 2 / 11,
    }
    assert sum(Fraction(c, total.closed) for c in total.outcomes.values()) == 1
    assert (total.escalated, total.reminded) == (1, 2)


def test_percentiles_are_nearest_rank_over_decisions_by_a_person(metrics_data):
    # 2 4 5 6 8 30 120 300 600: ranks ceil(.5*9)=5, ceil(.9*9)=9, ceil(.95*9)=9
    total = metrics_report(now=NOW).total

    assert total.percentiles == {50: 8.0, 90: 600.0, 95: 600.0}


def test_queue_depth_and_oldest_pending_ignore_the_window(metrics_data):
    total = metrics_report(now=NOW).total

    assert total.queue_depth == 2
    assert total.oldest_pending_at == NOW - 40 * DAY
    assert total.oldest_pending_age_seconds == 40 * 86400


def test_by_tier(metrics_data):
    rows = rows_by_key("tier")

    assert list(rows) == ["write", "critical"]  # most requests first
    write, critical = rows["write"], rows["critical"]
    assert (write.requests, write.pending) == (7, 0)
    assert write.outcomes == outcomes(approve=5, edit=1, reject=1)
    assert write.percentiles == {50: 6.0, 90: 300.0, 95: 300.0}  # 2 4 5 6 8 120 300
    assert (write.escalated, write.reminded, write.queue_depth) == (0, 1, 0)
    assert write.oldest_pending_age_seconds is None
    assert (critical.requests, critical.pending) == (5, 1)
    assert critical.outcomes == outcomes(approve=1, respond=1, expired=2)
    assert critical.rates["expired"] == 0.5
    assert critical.percentiles == {50: 30.0, 90: 600.0, 95: 600.0}  # 30 600
    assert (critical.escalated, critical.reminded, critical.queue_depth) == (1, 1, 2)
    assert critical.oldest_pending_age_seconds == 40 * 86400


def test_by_tool(metrics_data):
    rows = rows_by_key("tool")

    assert list(rows) == ["refund_order", "rollback_deploy", "create_incident_ticket"]
    refund = rows["refund_order"]
    assert refund.requests == 6
    assert refund.outcomes == outcomes(approve=4, edit=1, reject=1)
    assert refund.percentiles == {50: 6.0, 90: 300.0, 95: 300.0}  # 4 5 6 8 120 300
    ticket = rows["create_incident_ticket"]
    assert (ticket.requests, ticket.outcomes["approve"], ticket.rates["approve"]) == (1, 1, 1.0)
    assert ticket.percentiles == {50: 2.0, 90: 2.0, 95: 2.0}
    assert rows["rollback_deploy"].queue_depth == 2


def test_by_agent_follows_the_run(metrics_data):
    rows = rows_by_key("agent")

    assert list(rows) == ["incident_copilot", "refund_agent"]
    assert rows["incident_copilot"].requests == 6
    assert rows["incident_copilot"].outcomes == outcomes(approve=2, respond=1, expired=2)
    assert rows["incident_copilot"].percentiles == {50: 30.0, 90: 600.0, 95: 600.0}  # 2 30 600
    assert rows["refund_agent"].requests == 6


def test_by_reviewer_is_the_final_decider_and_system_labels_group_the_rest(metrics_data):
    rows = rows_by_key("reviewer")

    assert set(rows) == {"bob", "carol", "system:timeout", ""}
    bob, carol = rows["bob"], rows["carol"]
    assert bob.outcomes == outcomes(approve=5)
    assert bob.percentiles == {50: 5.0, 90: 8.0, 95: 8.0}  # 2 4 5 6 8
    assert carol.outcomes == outcomes(approve=1, edit=1, reject=1, respond=1)
    assert carol.percentiles == {50: 120.0, 90: 600.0, 95: 600.0}  # 30 120 300 600
    timeout = rows["system:timeout"]
    assert timeout.outcomes == outcomes(expired=2)
    assert timeout.percentiles == {50: None, 90: None, 95: None}
    undecided = rows[""]
    assert (undecided.label, undecided.requests, undecided.pending) == ("(undecided)", 1, 1)
    assert undecided.queue_depth == 2


def test_fatigue_flags_bob_and_the_ticket_tool(metrics_data):
    report = metrics_report(now=NOW)

    flagged = [
        (f.dimension, f.key, f.approve_rate, f.median_seconds, f.decisions) for f in report.fatigue
    ]
    assert flagged == [
        ("reviewer", "bob", 1.0, 5.0, 5),
        ("tool", "create_incident_ticket", 1.0, 2.0, 1),
    ]
    assert [row.key for row in report.rows if row.fatigue] == []  # grouped by tier: no flag
    assert [row.key for row in metrics_report(group="reviewer", now=NOW).rows if row.fatigue] == [
        "bob"
    ]


def test_fatigue_thresholds_are_settings(metrics_data, settings):
    settings.METRICS_FATIGUE_MEDIAN_SECONDS = 5  # bob's median is 5 s: not under 5
    assert [f.key for f in metrics_report(now=NOW).fatigue] == ["create_incident_ticket"]

    settings.METRICS_FATIGUE_MEDIAN_SECONDS = 10
    settings.METRICS_FATIGUE_APPROVAL_RATE = 1.0  # nobody approves more than everything
    assert metrics_report(now=NOW).fatigue == []


def test_decisions_per_day_stack_outcomes_by_decision_day(metrics_data):
    days = metrics_report(now=NOW).decisions_per_day

    assert len(days) == 31
    assert (days[0].date, days[-1].date) == (dt.date(2026, 2, 13), dt.date(2026, 3, 15))
    nonzero = {
        d.date.isoformat(): {k: v for k, v in d.counts.items() if v} for d in days if d.total
    }
    assert nonzero == {
        "2026-03-08": {"expired": 1},
        "2026-03-10": {"reject": 1, "expired": 1},
        "2026-03-11": {"edit": 1},
        "2026-03-12": {"approve": 2},
        "2026-03-13": {"approve": 2},
        "2026-03-14": {"approve": 2, "respond": 1},
    }


def test_time_to_decision_histogram_and_queue_age(metrics_data):
    report = metrics_report(now=NOW)

    assert [(b.label, b.count) for b in report.time_to_decision] == [
        ("<10s", 5),
        ("10-30s", 0),
        ("30s-1m", 1),
        ("1-5m", 1),
        ("5-15m", 2),
        ("15m-1h", 0),
        ("1-4h", 0),
        ("4-24h", 0),
        ("≥24h", 0),
    ]
    assert [b.count for b in report.queue_age] == [0, 0, 0, 1, 0, 1]


def test_runs_by_status_count_runs_started_in_the_window_including_dead(metrics_data):
    runs = metrics_report(now=NOW).runs_by_status

    assert runs == {
        "queued": 0,
        "running": 0,
        "waiting": 1,
        "completed": 1,
        "failed": 0,
        "cancelled": 0,
        "dead": 1,
    }


def test_a_longer_window_takes_in_the_older_decision(metrics_data):
    total = metrics_report(window_days=90, now=NOW).total

    assert total.requests == 14  # and the pending one from 40 days ago
    assert total.outcomes["approve"] == 7
    # 1 2 4 5 6 8 30 120 300 600: ranks 5, 9, 10
    assert total.percentiles == {50: 6.0, 90: 300.0, 95: 600.0}
    assert metrics_report(window_days=90, now=NOW).runs_by_status["failed"] == 1


def test_an_empty_window_has_no_rates_and_no_percentiles(db):
    report = metrics_report(window_days=1, now=NOW)

    assert report.rows == []
    assert report.total.requests == 0
    assert set(report.total.rates.values()) == {None}
    assert report.total.percentiles == {50: None, 90: None, 95: None}
    assert report.fatigue == []


def test_unknown_group_or_window_is_refused():
    with pytest.raises(ValueError, match="group"):
        metrics_report(group="colour", now=NOW)
    with pytest.raises(ValueError, match="window_days"):
        metrics_report(window_days=0, now=NOW)
