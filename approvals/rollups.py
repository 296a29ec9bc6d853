"""Metrics rollups: kept in the transaction that closes an approval, rebuilt by a backfill.

What is counted (the same definitions as console/metrics/definitions.py): each closed approval
adds one to its cell per dimension (tier, tool, agent, reviewer) and outcome, in every level's
block of its creation day (UTC), with its escalated/reminded flags; a decision by a person also
adds one to its log bucket of time to decision and to the page's time-to-decision bar; and one
to the decisions of its decision day (console time zone).

Buckets: ``bucket_of(s) = ceil(ln(s) / ln(GAMMA))`` with ``GAMMA = (1 + ALPHA) / (1 - ALPHA)``,
and a bucket reads back as ``2 * GAMMA**b / (GAMMA + 1)``, so every value read back is within a
relative ``ALPHA`` (1%) of every value the bucket holds (DDSketch's construction). Durations
under ``MIN_SECONDS`` share one bucket that reads back as 0.

Writes are two statements, ``INSERT ... ON CONFLICT DO UPDATE``: counters add ``excluded.n``,
a cell's histogram (one JSON object ``{"<bucket>": n}`` per cell, MetricsHistogram) is merged
with the new one key by key inside the statement (``jsonb_each_text`` / ``json_each``): atomic on
Postgres and SQLite, so concurrent decisions never lose a count; rows go in one fixed order, so
two transactions never wait on each other's rows in a cycle.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections import Counter
from collections.abc import Iterable

from django.db import connection
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.rollup_models import MetricsCount, MetricsHistogram

ALPHA = 0.01
GAMMA = (1 + ALPHA) / (1 - ALPHA)
_LOG_GAMMA = math.log(GAMMA)
MIN_SECONDS = 0.001
ZERO_BUCKET = -1_000_000
LEVELS = 10  # blocks of 1, 2, 4 ... 512 days: a 365-day window is at most 2 * LEVELS blocks
DIMENSIONS: tuple[str, ...] = ("tier", "tool", "agent", "reviewer")
# Upper bounds (exclusive, seconds) of the page's time-to-decision bars
# (console.metrics.definitions.TIME_BUCKETS; a test keeps the two equal).
TTD_BAR_BOUNDS: tuple[float, ...] = (10, 30, 60, 300, 900, 3600, 14400, 86400)
_EPOCH = dt.date(1970, 1, 1)

Status = ApprovalRequest.Status
_PERSON_OUTCOMES = {
    Status.APPROVED: "approve",
    Status.EDITED: "edit",
    Status.REJECTED: "reject",
    Status.RESPONDED: "respond",
}


def bucket_of(seconds: float) -> int:
    """The log bucket of a duration in seconds."""
    if seconds < MIN_SECONDS:
        return ZERO_BUCKET
    return math.ceil(math.log(seconds) / _LOG_GAMMA)


def bucket_value(bucket: int) -> float:
    """What a bucket reads back as: within ALPHA of any duration it holds."""
    if bucket == ZERO_BUCKET:
        return 0.0
    return 2 * GAMMA**bucket / (GAMMA + 1)


def day_number(day: dt.date) -> int:
    return (day - _EPOCH).days


def day_of(moment: dt.datetime) -> int:
    """The UTC day (days since 1970-01-01) of a moment."""
    return day_number(moment.astimezone(dt.UTC).date())


def day_date(number: int) -> dt.date:
    return _EPOCH + dt.timedelta(days=number)


def blocks_cover(first: int, last: int) -> list[tuple[int, int]]:
    """The fewest (level, block) pairs covering the days ``first..last`` exactly."""
    blocks: list[tuple[int, int]] = []
    day = first
    while day <= last:
        level = LEVELS - 1
        while level and (day % (1 << level) or day + (1 << level) - 1 > last):
            level -= 1
        blocks.append((level, day >> level))
        day += 1 << level
    return blocks


def outcome_of(*, status: str, person: bool) -> str | None:
    """The report's outcome of an approval (None while pending)."""
    if status == Status.PENDING:
        return None
    if not person:
        return "expired"
    return _PERSON_OUTCOMES.get(status, "expired")


def _ttd_bar(seconds: float) -> int:
    for index, bound in enumerate(TTD_BAR_BOUNDS):
        if seconds < bound:
            return index
    return len(TTD_BAR_BOUNDS)


def _cells(
    *,
    created_at: dt.datetime,
    decided_at: dt.datetime | None,
    status: str,
    keys: dict[str, str],
    person: bool,
    escalated: bool,
    reminded: bool,
    counts: Counter,
    buckets: Counter,
    levels: range = range(LEVELS),
) -> None:
    """Add one closed approval's cells to ``counts`` ((cell) -> [n, escalated, reminded])
    and ``buckets``; only level 0 when ``levels`` says so (the backfill adds the rest)."""
    outcome = outcome_of(status=status, person=person)
    if outcome is None:
        return
    day = day_of(created_at)
    seconds = (decided_at - created_at).total_seconds() if decided_at else 0.0
    for level in levels:
        block = day >> level
        for dimension in DIMENSIONS:
            cell = (level, block, dimension, keys[dimension], outcome)
            counts[cell + ("n",)] += 1
            counts[cell + ("escalated",)] += int(escalated)
            counts[cell + ("reminded",)] += int(reminded)
            if person:
                buckets[(level, block, dimension, keys[dimension], bucket_of(seconds))] += 1
        if person:
            counts[(level, block, "ttd", str(_ttd_bar(seconds)), "", "n")] += 1
    if decided_at is not None and 0 in levels:
        decided_day = day_number(timezone.localdate(decided_at))
        counts[(0, decided_day, "day", "", outcome, "n")] += 1


def _keys(approval: ApprovalRequest, *, agent: str) -> dict[str, str]:
    decider = approval.decided_by
    return {
        "tier": approval.tier,
        "tool": approval.tool,
        "agent": agent,
        "reviewer": decider.get_username() if decider is not None else approval.decided_by_label,
    }


def approvals_rollup_add(*, approvals: Iterable[ApprovalRequest], agent: str | None = None) -> None:
    """Count closed approvals in the rollups (call it in the transaction that closes them).

    ``agent`` is their run's agent when the caller knows it (saves reading the run).
    """
    counts: Counter = Counter()
    buckets: Counter = Counter()
    for approval in approvals:
        _cells(
            created_at=approval.created_at,
            decided_at=approval.decided_at,
            status=approval.status,
            keys=_keys(approval, agent=agent if agent is not None else approval.run.agent),
            person=approval.decided_by_id is not None,
            escalated=approval.escalated_at is not None,
            reminded=approval.reminded_at is not None,
            counts=counts,
            buckets=buckets,
        )
    _upsert(counts=counts, buckets=buckets)


def approval_rollup_add(*, approval: ApprovalRequest, agent: str | None = None) -> None:
    """Count one closed approval in the rollups (two statements)."""
    approvals_rollup_add(approvals=[approval], agent=agent)


def _count_rows(counts: Counter) -> list[tuple]:
    merged: dict[tuple, list[int]] = {}
    for (*cell, field), value in counts.items():
        merged.setdefault(tuple(cell), [0, 0, 0])[("n", "escalated", "reminded").index(field)] += (
            value
        )
    return [(*cell, *values) for cell, values in sorted(merged.items())]


def _histograms(buckets: Counter) -> dict[tuple, dict[str, int]]:
    """{(level, block, dimension, key): {"<bucket>": n}} from {(cell..., bucket): n}."""
    cells: dict[tuple, dict[str, int]] = {}
    for (*cell, bucket), n in buckets.items():
        cells.setdefault(tuple(cell), {})[str(bucket)] = n
    return cells


def _histogram_rows(buckets: Counter) -> list[tuple]:
    """(level, block, dimension, key, '{"<bucket>": n}') per cell, in sorted order."""
    return [(*cell, json.dumps(counts)) for cell, counts in sorted(_histograms(buckets).items())]


def _histogram_merge(table: str) -> str:
    """The SQL expression of a stored histogram plus ``excluded``'s, key by key."""
    if connection.vendor == "postgresql":
        return (
            "(SELECT jsonb_object_agg(key, total) FROM (SELECT key, SUM(value::bigint) AS total "
            f"FROM (SELECT key, value FROM jsonb_each_text({table}.counts) UNION ALL "
            "SELECT key, value FROM jsonb_each_text(excluded.counts)) AS u GROUP BY key) AS s)"
        )
    return (
        "(SELECT json_group_object(key, total) FROM (SELECT key, SUM(value) AS total "
        f"FROM (SELECT key, value FROM json_each({table}.counts) UNION ALL "
        "SELECT key, value FROM json_each(excluded.counts)) GROUP BY key))"
    )


def _upsert(*, counts: Counter, buckets: Counter, chunk: int = 500) -> None:
    """Add the cells, in sorted order (the same lock order in every transaction)."""
    count_table = MetricsCount._meta.db_table
    histogram_table = MetricsHistogram._meta.db_table
    count_sql = (
        f"INSERT INTO {count_table} "
        "(level, block, dimension, group_key, outcome, n, escalated, reminded) VALUES {values} "
        "ON CONFLICT (level, block, dimension, group_key, outcome) DO UPDATE SET "
        f"n = {count_table}.n + excluded.n, "
        f"escalated = {count_table}.escalated + excluded.escalated, "
        f"reminded = {count_table}.reminded + excluded.reminded"
    )
    histogram_sql = (
        f"INSERT INTO {histogram_table} (level, block, dimension, group_key, counts) "
        "VALUES {values} ON CONFLICT (level, block, dimension, group_key) "
        f"DO UPDATE SET counts = {_histogram_merge(histogram_table)}"
    )
    as_json = "%s::jsonb" if connection.vendor == "postgresql" else "%s"
    statements = (
        (count_sql, _count_rows(counts), "(" + ", ".join(["%s"] * 8) + ")"),
        (histogram_sql, _histogram_rows(buckets), f"(%s, %s, %s, %s, {as_json})"),
    )
    with connection.cursor() as cursor:
        for sql, rows, placeholder in statements:
            # Within the backend's variable limit (SQLite: 999 as Django assumes it).
            limit = connection.features.max_query_params
            step = min(chunk, limit // placeholder.count("%s")) if limit else chunk
            for start in range(0, len(rows), step):
                part = rows[start : start + step]
                cursor.execute(
                    sql.format(values=", ".join([placeholder] * len(part))),
                    [value for row in part for value in row],
                )


# --- the backfill ------------------------------------------------------------------------------
