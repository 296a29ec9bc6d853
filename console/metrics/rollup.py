"""The report's rows from the rollups (approvals/rollups.py) plus the live pending rows.

A window here is whole UTC days: the last ``window_days`` days including today (by the
approval's ``created_at``), read as at most 2 * LEVELS blocks per cell whatever its length.
Closed approvals come from the rollups; approvals still pending (not in the rollups yet) are
counted live, through the ``approval_status_created`` index. Percentiles come from the log
histogram: within ALPHA (1%) of the exact nearest-rank value.
"""

from __future__ import annotations

import datetime as dt
from functools import reduce
from operator import or_

from django.db.models import Count, Q, Sum
from django.utils import timezone

from approvals.rollup_models import MetricsCount, MetricsHistogram
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
from console.metrics.portable import window


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
    *, groups: tuple[str | None, ...], first: int, last: int
) -> dict[str | None, list[MetricsRow]]:
    """Each grouping's rows (None: the whole window, summed over the tiers) for days
    ``first..last``, without queue figures or fatigue flags. Three queries."""
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
    pending = (
        window(since=day_start(first), now=day_start(last + 1))
        .filter(status=Status.PENDING)
        .exclude(created_at=day_start(last + 1))
        .values_list("tier", "tool", "run__agent")
        .annotate(
            n_=Count("id"),
            escalated_=Count("id", filter=Q(escalated_at__isnull=False)),
            reminded_=Count("id", filter=Q(reminded_at__isnull=False)),
        )
    )
    for tier, tool, agent, n, escalated, reminded in pending:
        keys = {"tier": tier, "tool": tool, "agent": agent or "", "reviewer": ""}
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
    histograms = MetricsHistogram.objects.filter(blocks, dimension__in=dimensions).values_list(
        "dimension", "group_key", "counts"
    )
    for dimension, key, counts in histograms.order_by():
        cell = merged.get((dimension, key))
        if cell is None:
            merged[dimension, key] = dict(counts)
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
