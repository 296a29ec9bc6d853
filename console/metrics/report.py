"""The metrics report: ``metrics_report()`` and what assembles it, and its dict form (the API).

Picks the Postgres GROUPING SETS pass or the portable queries, adds the queue and the fatigue
flags, and sorts the table.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from approvals.canary_selectors import CatchRate, catch_rates
from approvals.rollup_pending import pending_cells
from approvals.rollup_runs import runs_by_status_days
from approvals.rollups import ALPHA
from console.metrics.definitions import (
    GROUP_DEFAULT,
    GROUPS,
    PERCENTILES,
    WINDOW_DEFAULT,
    WINDOW_MAX,
    WINDOW_MIN,
    FatigueFlag,
    MetricsReport,
    MetricsRow,
    fatigue_thresholds,
)
from console.metrics.portable import (
    metrics_decisions_per_day,
    metrics_queue_age,
    metrics_runs_by_status,
    metrics_time_to_decision,
    queue_fill,
    rows_by_queries,
    window,
)
from console.metrics.postgres import (
    ROLLUP_SETTINGS,
    on_postgres,
    postgres_tune,
    rows_by_grouping_sets,
)
from console.metrics.rollup import (
    day_range,
    day_start,
    decisions_per_day_from_rollups,
    queue_from_cells,
    rows_from_rollups,
    time_to_decision_from_rollups,
)


def _rows_by_group(
    *, groups: tuple[str | None, ...], since: dt.datetime, now: dt.datetime
) -> dict[str | None, list[MetricsRow]]:
    """The window's rows for each grouping, without queue figures or fatigue flags."""
    if on_postgres():
        found = rows_by_grouping_sets(groups=groups, since=since, now=now)
    else:
        found = {group: rows_by_queries(group=group, since=since, now=now) for group in groups}
    if None in found and not found[None]:
        found[None] = [MetricsRow(key="")]
    return found


def _table(
    rows: list[MetricsRow],
    *,
    group: str,
    now: dt.datetime,
    queue: dict | None = None,
    since: dt.datetime | None = None,
    caught: dict[str, CatchRate] | None = None,
) -> list[MetricsRow]:
    rows = queue_fill(rows, group=group, now=now, found=queue)
    if group in ("reviewer", "tool"):
        rate, median = fatigue_thresholds()
        if group != "reviewer":
            caught = {}
        elif caught is None:
            caught = catch_rates(since=since, now=now)
        known = {row.key for row in rows}  # a reviewer who decided canaries only has a row too
        rows += [MetricsRow(key=key) for key in caught if key not in known]
        for row in rows:
            row.canaries = caught.get(row.key)
            row.fatigue = _is_fatigued(row, rate=rate, median=median) or _misses(row.canaries)
    rows.sort(key=lambda row: (-row.requests, -row.queue_depth, row.label))
    return rows


def metrics_rows(*, group: str, since: dt.datetime, now: dt.datetime) -> list[MetricsRow]:
    """The table: one row per group, most requests first; fatigue flags for reviewer and tool."""
    rows = _rows_by_group(groups=(group,), since=since, now=now)[group]
    return _table(rows, group=group, now=now, since=since)


def metrics_total(*, since: dt.datetime, now: dt.datetime) -> MetricsRow:
    """The whole window in one row (key ""), with the queue now."""
    rows = _rows_by_group(groups=(None,), since=since, now=now)[None]
    [row] = queue_fill(rows, group=None, now=now)
    return row


def _is_fatigued(row: MetricsRow, *, rate: float, median: float) -> bool:
    approve_rate = row.rates["approve"]
    return (
        approve_rate is not None
        and row.median_seconds is not None
        and approve_rate > rate
        and row.median_seconds < median
    )


def _misses(canaries: CatchRate | None) -> bool:
    """Catches too few canaries: below AUTONOMY_CANARY_FATIGUE_CATCH_RATE, with at least
    AUTONOMY_CANARY_MIN_SEEN of them counted (caught or missed)."""
    return (
        canaries is not None
        and canaries.counted >= settings.AUTONOMY_CANARY_MIN_SEEN
        and (canaries.rate or 0.0) < settings.AUTONOMY_CANARY_FATIGUE_CATCH_RATE
    )


def metrics_fatigue(
    *,
    since: dt.datetime,
    now: dt.datetime,
    computed: dict[str | None, list[MetricsRow]] | None = None,
    caught: dict[str, CatchRate] | None = None,
) -> list[FatigueFlag]:
    """Reviewers and tools that approve almost everything, fast, and reviewers who miss
    canaries. ``computed`` and ``caught`` (the catch rates) reuse what was read."""
    computed = dict(computed or {})
    missing = tuple(d for d in ("reviewer", "tool") if d not in computed)
    if missing:
        computed.update(_rows_by_group(groups=missing, since=since, now=now))
    rate, median = fatigue_thresholds()
    if caught is None:
        caught = catch_rates(since=since, now=now)
    flags: list[FatigueFlag] = []
    for dimension in ("reviewer", "tool"):
        rows = {row.key: row for row in computed[dimension]}
        if dimension == "reviewer":  # a reviewer with canaries only still has a row here
            rows.update({key: MetricsRow(key=key) for key in caught if key not in rows})
        for row in sorted(rows.values(), key=lambda row: row.label):
            canaries = caught.get(row.key) if dimension == "reviewer" else None
            fast = _is_fatigued(row, rate=rate, median=median)
            misses = _misses(canaries)
            if not (fast or misses):
                continue
            reasons = ["approves almost everything, fast"] if fast else []
            if misses:
                reasons.append(
                    f"caught {canaries.caught} of {canaries.counted} canaries "
                    f"(below {settings.AUTONOMY_CANARY_FATIGUE_CATCH_RATE:.0%})"
                )
            flags.append(
                FatigueFlag(
                    dimension=dimension,
                    key=row.key,
                    approve_rate=row.rates["approve"] or 0.0,
                    median_seconds=row.median_seconds or 0.0,
                    decisions=row.person_decisions,
                    reason="; ".join(reasons),
                    catch_rate=canaries.rate if canaries else None,
                )
            )
    return flags


SOURCES: tuple[str, ...] = ("auto", "rows", "rollups")


def metrics_report(
    *,
    window_days: int = WINDOW_DEFAULT,
    group: str = GROUP_DEFAULT,
    now: dt.datetime | None = None,
    source: str = "auto",
) -> MetricsReport:
    """Everything the metrics page, the API and the CSV export show.

    ``source``: "rows" (exact, rolling window), "rollups" (whole UTC days, percentiles within
    1%) or "auto": the rows when the window holds at most METRICS_EXACT_MAX_REQUESTS requests.
    """
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; expected one of {', '.join(SOURCES)}")
    if group not in GROUPS:
        raise ValueError(f"unknown group {group!r}; expected one of {', '.join(GROUPS)}")
    if not WINDOW_MIN <= window_days <= WINDOW_MAX:
        raise ValueError(f"window_days must be in {WINDOW_MIN}..{WINDOW_MAX}")
    now = now or timezone.now()
    if not on_postgres():
        # No transaction: SQLite's IMMEDIATE transactions would take the write lock.
        return _report(window_days=window_days, group=group, now=now, source=source)
    with transaction.atomic():  # SET LOCAL applies to every query of the report
        postgres_tune()
        return _report(window_days=window_days, group=group, now=now, source=source)


def window_is_small(*, since: dt.datetime, now: dt.datetime) -> bool:
    """Whether the rolling window holds at most METRICS_EXACT_MAX_REQUESTS requests (a count
    that stops at the limit: cheap however big the table)."""
    limit = settings.METRICS_EXACT_MAX_REQUESTS
    return limit > 0 and window(since=since, now=now)[: limit + 1].count() <= limit


def _report(*, window_days: int, group: str, now: dt.datetime, source: str) -> MetricsReport:
    since = now - dt.timedelta(days=window_days)
    # One pass computes the chosen grouping, the two the fatigue signal needs, and the total.
    groups = tuple(dict.fromkeys((group, "reviewer", "tool", None)))
    exact = source == "rows" or (source == "auto" and window_is_small(since=since, now=now))
    queue: dict[str | None, dict | None] = {group: None, None: None}  # None: count the queue live
    if exact:  # few rows: exact figures from them, over the rolling window
        computed = _rows_by_group(groups=groups, since=since, now=now)
        per_day = metrics_decisions_per_day(since=since, now=now)
        time_to_decision = metrics_time_to_decision(since=since, now=now)
        runs_by_status = metrics_runs_by_status(since=since, now=now)
    else:  # the rollups: whole UTC days, percentiles within ALPHA
        postgres_tune(ROLLUP_SETTINGS)  # inside metrics_report()'s transaction
        first, last = day_range(window_days=window_days, now=now)
        since = day_start(first)
        # The still-pending approvals, of the window and of the queue, from the kept counts.
        cells = pending_cells()
        computed = rows_from_rollups(groups=groups, first=first, last=last, cells=cells)
        queue = queue_from_cells(cells, groups=(group, None))
        per_day = decisions_per_day_from_rollups(since=since, now=now)
        time_to_decision = time_to_decision_from_rollups(first=first, last=last)
        # Runs created on the window's whole UTC days, from the trigger-kept counts.
        runs_by_status = runs_by_status_days(first=first, last=last)
    [total] = queue_fill(computed[None], group=None, now=now, found=queue[None])
    caught = catch_rates(since=since, now=now)  # each reviewer's canaries (one query)
    rate, median = fatigue_thresholds()
    return MetricsReport(
        window_days=window_days,
        group=group,
        since=since,
        now=now,
        fatigue_approval_rate=rate,
        fatigue_median_seconds=median,
        total=total,
        fatigue=metrics_fatigue(since=since, now=now, computed=computed, caught=caught),
        rows=_table(computed[group], group=group, now=now, queue=queue[group], caught=caught),
        decisions_per_day=per_day,
        time_to_decision=time_to_decision,
        queue_age=metrics_queue_age(now=now),
        runs_by_status=runs_by_status,
        exact=exact,
    )


# --- serialisation (the API's JSON) ------------------------------------------------------------


def row_as_dict(row: MetricsRow) -> dict[str, Any]:
    return {
        "key": row.key,
        "label": row.label,
        "requests": row.requests,
        "pending": row.pending,
        "closed": row.closed,
        "outcomes": dict(row.outcomes),
        "rates": row.rates,
        "time_to_decision_seconds": {f"p{p}": row.percentiles[p] for p in PERCENTILES},
        "escalated": row.escalated,
        "reminded": row.reminded,
        "queue_depth": row.queue_depth,
        "oldest_pending_at": row.oldest_pending_at,
        "oldest_pending_age_seconds": row.oldest_pending_age_seconds,
        "fatigue": row.fatigue,
        "canaries": _canaries_dict(row.canaries),
    }


def _canaries_dict(canaries: CatchRate | None) -> dict[str, Any] | None:
    if canaries is None:
        return None
    return {
        "seen": canaries.seen,
        "caught": canaries.caught,
        "missed": canaries.missed,
        "catch_rate": canaries.rate,
    }


def report_as_dict(report: MetricsReport) -> dict[str, Any]:
    return {
        "window_days": report.window_days,
        "group": report.group,
        "since": report.since,
        "now": report.now,
        "fatigue_thresholds": {
            "approval_rate": report.fatigue_approval_rate,
            "median_seconds": report.fatigue_median_seconds,
            "canary_catch_rate": settings.AUTONOMY_CANARY_FATIGUE_CATCH_RATE,
            "canary_min_seen": settings.AUTONOMY_CANARY_MIN_SEEN,
        },
        "total": row_as_dict(report.total),
        "rows": [row_as_dict(row) for row in report.rows],
        "fatigue": [
            {
                "dimension": flag.dimension,
                "key": flag.key,
                "approve_rate": flag.approve_rate,
                "median_seconds": flag.median_seconds,
                "decisions": flag.decisions,
                "reason": flag.reason,
                "catch_rate": flag.catch_rate,
            }
            for flag in report.fatigue
        ],
        "decisions_per_day": [{"date": day.date, **day.counts} for day in report.decisions_per_day],
        "time_to_decision": [{"label": b.label, "count": b.count} for b in report.time_to_decision],
        "queue_age": [{"label": b.label, "count": b.count} for b in report.queue_age],
        "runs_by_status": dict(report.runs_by_status),
        "exact": report.exact,
        "percentile_relative_error": 0.0 if report.exact else ALPHA,
    }
