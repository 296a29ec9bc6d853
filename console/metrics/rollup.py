"""The report's rows from the rollups (approvals/rollups.py) plus the live pending rows.

A window here is whole UTC days: the last ``window_days`` days including today (by the
approval's ``created_at``), read as at most 2 * LEVELS blocks per cell whatever its length.
Closed approvals come from the rollups; approvals still pending (not in the rollups yet) from
the trigger-kept pending counts (approvals/rollup_pending.py), which also give the queue depth;
only the oldest pending approval per key is read live (one row each, by index). Percentiles come from the log
histogram: within ALPHA (1%) of the exact nearest-rank value.
"""

from __future__ import annotations

import datetime as dt
from functools import reduce
from operator import or_

import orjson
from django.db import connection
from django.db.models import Q, Subquery, Sum, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.rollup_models import MetricsCount, MetricsHistogram
from approvals.rollup_pending import PendingCell
from approvals.rollups import blocks_cover, bucket_value, day_date, day_number, day_of
from console.metrics.definitions import (
    OUTCOMES,
    PERCENTILES,
    TIME_BUCKETS,
    Bucket,
    DayCounts,
    MetricsRow,
    Status,
)


def day_range(*, window_days: int, now: dt.datetime) -> tuple[int, int]:
    """(first, last) UTC day numbers of the window: the last ``window_days`` days, today too."""
    last = day_of(now)
    return last - window_days + 1, last


def day_start(number: int) -> dt.datetime:
    """Midnight UTC at the start of a day number."""
    return dt.datetime.combine(day_date(number), dt.time(), tzinfo=dt.UTC)


def _blocks(first: int, last: int) -> Q:
    return reduce(or_, (Q(level=level, block=block) for level, block in blocks_cover(first, last)))


def percentiles_from(buckets: list[tuple[int, int]]) -> dict[int, float | None]:
    """Nearest-rank percentiles of a histogram [(bucket, count)]: the rank ``ceil(p n / 100)``
    value's bucket, read back (within ALPHA of the exact value)."""
    ordered = sorted(buckets)
    total = sum(n for _, n in ordered)
    found: dict[int, float | None] = dict.fromkeys(PERCENTILES)
    if not total:
        return found
    # The ranks in increasing order, walked once beside the buckets.
    ranks = sorted(((p * total + 99) // 100, p) for p in PERCENTILES)
    seen, next_rank = 0, 0
    for bucket, n in ordered:
        seen += n
        while next_rank < len(ranks) and seen >= ranks[next_rank][0]:
            found[ranks[next_rank][1]] = bucket_value(bucket)
            next_rank += 1
        if next_rank == len(ranks):
            break
    return found


def rows_from_rollups(
    *, groups: tuple[str | None, ...], first: int, last: int, cells: list[PendingCell]
) -> dict[str | None, list[MetricsRow]]:
    """Each grouping's rows (None: the whole window, summed over the tiers) for days
    ``first..last``, without queue figures or fatigue flags. Two queries; the still-pending
    approvals come from ``cells`` (approvals.rollup_pending.pending_cells())."""
    dimensions = sorted({group or "tier" for group in groups})
    blocks = _blocks(first, last)
    rows: dict[tuple[str, str], MetricsRow] = {}

    def row(dimension: str, key: str) -> MetricsRow:
        if (dimension, key) not in rows:
            rows[dimension, key] = MetricsRow(key=key)
        return rows[dimension, key]

    counts = (
        MetricsCount.objects.filter(blocks, dimension__in=dimensions)
        .values_list("dimension", "group_key", "outcome")
        .annotate(n_=Sum("n"), escalated_=Sum("escalated"), reminded_=Sum("reminded"))
        .order_by()
    )
    for dimension, key, outcome, n, escalated, reminded in counts:
        if not n:
            continue
        target = row(dimension, key)
        target.requests += n
        target.outcomes[outcome] += n
        target.escalated += escalated
        target.reminded += reminded
    percentiles_by_cell = _percentiles(blocks, dimensions)
    for (dimension, key), percentiles in percentiles_by_cell.items():
        if (dimension, key) in rows:
            rows[dimension, key].percentiles = percentiles
    for day, tier, tool, agent, n, escalated, reminded in cells:
        if not first <= day <= last:
            continue
        keys = {"tier": tier, "tool": tool, "agent": agent, "reviewer": ""}
        for dimension in dimensions:
            target = row(dimension, keys[dimension])
            target.requests += n
            target.pending += n
            target.escalated += escalated
            target.reminded += reminded
    found: dict[str | None, list[MetricsRow]] = {}
    for group in groups:
        if group:
            found[group] = [value for (dim, _), value in rows.items() if dim == group]
    if None in groups:
        found[None] = [_total([value for (dim, _), value in rows.items() if dim == "tier"])]
        if ("*", "") in percentiles_by_cell:
            found[None][0].percentiles = percentiles_by_cell["*", ""]
    return found


def _add(into: dict[str, int], counts: dict[str, int]) -> None:
    # Zero the keys ``into`` lacks first (one set difference, in C), then add without a
    # .get() per key: about half the time of the plain loop (bench/metrics.py, 80k buckets).
    for bucket in counts.keys() - into.keys():
        into[bucket] = 0
    for bucket, n in counts.items():
        into[bucket] += n


def _percentiles(
    blocks: Q, dimensions: list[str]
) -> dict[tuple[str, str], dict[int, float | None]]:
    """Nearest-rank percentiles per (dimension, key), and ("*", "") for all the tiers together.

    One query reads one histogram row per block and key (at most 2 * LEVELS blocks x the keys,
    a few hundred rows whatever the window); the buckets are summed here, a few thousand per
    key. Measured in bench/metrics.py against the database doing it (a window function over
    one row per bucket, ~100 ms at 1M approvals): summing here takes a few ms.
    """
    merged: dict[tuple[str, str], dict[str, int]] = {}
    # The JSON read as text and decoded by orjson: a third of the time of the JSONField's
    # json.loads per row (1M approvals, the 216 rows of a 90-day window: 12 against 34 ms).
    histograms = (
        MetricsHistogram.objects.filter(blocks, dimension__in=dimensions)
        .annotate(text=Cast("counts", TextField()))
        .values_list("dimension", "group_key", "text")
    )
    for dimension, key, text in histograms.order_by():
        counts = orjson.loads(text)
        cell = merged.get((dimension, key))
        if cell is None:
            merged[dimension, key] = counts
        else:
            _add(cell, counts)
    everything: dict[str, int] = {}
    for (dimension, _), histogram in merged.items():
        if dimension == "tier":  # every closed approval has exactly one tier
            _add(everything, histogram)
    merged["*", ""] = everything
    return {
        cell: percentiles_from([(int(bucket), n) for bucket, n in histogram.items()])
        for cell, histogram in merged.items()
    }


def _total(tiers: list[MetricsRow]) -> MetricsRow:
    total = MetricsRow(key="")
    for tier in tiers:
        total.requests += tier.requests
        total.pending += tier.pending
        total.escalated += tier.escalated
        total.reminded += tier.reminded
        for name in OUTCOMES:
            total.outcomes[name] += tier.outcomes[name]
    return total


def time_to_decision_from_rollups(*, first: int, last: int) -> list[Bucket]:
    """The page's time-to-decision bars over days ``first..last``."""
    counts = dict(
        MetricsCount.objects.filter(_blocks(first, last), dimension="ttd")
        .values_list("group_key")
        .annotate(n_=Sum("n"))
        .order_by()
    )
    return [Bucket(label, counts.get(str(i), 0)) for i, (label, _) in enumerate(TIME_BUCKETS)]


def decisions_per_day_from_rollups(*, since: dt.datetime, now: dt.datetime) -> list[DayCounts]:
    """Closed approvals per (whole) day of their decision, console time zone, by outcome."""
    first, last = timezone.localdate(since), timezone.localdate(now)
    days = {
        first + dt.timedelta(days=offset): dict.fromkeys(OUTCOMES, 0)
        for offset in range((last - first).days + 1)
    }
    for block, outcome, n in (
        MetricsCount.objects.filter(
            level=0, dimension="day", block__gte=day_number(first), block__lte=day_number(last)
        )
        .values_list("block", "outcome")
        .annotate(n_=Sum("n"))
        .order_by()
    ):
        if outcome in OUTCOMES:
            days[day_date(block)][outcome] += n
    return [DayCounts(date=date, counts=counts) for date, counts in days.items()]


# Grouping -> the approval's field, for the oldest pending approval of one key.
_FIELDS = {"tier": "tier", "tool": "tool", "agent": "run__agent"}
_OLDEST_PER_QUERY = 500


def queue_from_cells(
    cells: list[PendingCell], *, groups: tuple[str | None, ...]
) -> dict[str | None, dict[str, dict]]:
    """The queue now per grouping, {key: {"depth": n, "oldest": created_at}}, for queue_fill.

    Depths are the kept counts summed over every day. The oldest pending approval of each key
    is one live read: one query, a scalar subquery per key ordered by ``created_at`` with
    LIMIT 1 through ``approval_status_created``, starting at the first day the counts hold
    that key, so it stops at the key's first pending row instead of counting them all.
    """
    depth: dict[str | None, dict[str, int]] = {group: {} for group in groups}
    first_day: dict[str | None, dict[str, int]] = {group: {} for group in groups}
    for day, tier, tool, agent, n, _, _ in cells:
        keys = {"tier": tier, "tool": tool, "agent": agent}
        for group in groups:
            key = keys.get(group, "")  # the whole queue, or reviewer: "" while pending
            depth[group][key] = depth[group].get(key, 0) + n
            if n > 0:
                first_day[group][key] = min(day, first_day[group].get(key, day))
    pending = ApprovalRequest.objects.filter(status=Status.PENDING)
    oldest_of: dict[str, tuple[str, str]] = {}
    for group in groups:
        if group in _FIELDS:
            for key in first_day[group]:
                oldest_of[f"o{len(oldest_of)}"] = (group, key)
    annotations = {
        name: Subquery(
            pending.filter(
                created_at__gte=day_start(first_day[group][key]), **{_FIELDS[group]: key}
            )
            .order_by("created_at")
            .values("created_at")[:1]
        )
        for name, (group, key) in oldest_of.items()
    }
    # A query per chunk of keys: Postgres takes at most 1664 result columns, SQLite 2000
    # (SQLITE_MAX_COLUMN) and maybe 999 variables (three a key), and a queue can hold that
    # many tools.
    size = min(_OLDEST_PER_QUERY, ((connection.features.max_query_params or 10**6) - 1) // 3)
    names = list(annotations)
    chunks = [names[i : i + size] for i in range(0, len(names), size)]
    found = None
    oldest: dict[tuple[str | None, str], object] = {}
    for chunk in chunks or [[]]:
        part = {name: annotations[name] for name in chunk}
        found = (
            pending.order_by("created_at").annotate(**part).values("created_at", *part)
        ).first()
        if found is None:
            break
        for name in chunk:
            oldest[oldest_of[name]] = found[name]
    queue: dict[str | None, dict[str, dict]] = {}
    for group in groups:
        queue[group] = {}
        for key, n in depth[group].items():
            at = oldest.get((group, key)) if group in _FIELDS else (found or {}).get("created_at")
            if n > 0 and at is not None:  # no live row: nothing is pending there any more
                queue[group][key] = {"depth": n, "oldest": at}
    return queue
