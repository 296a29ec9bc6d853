"""Manager metrics: approval outcomes, time to decision, queue and runs (selectors).

Everything is computed by the database (aggregates over indexed ranges); no approval row is
ever loaded into Python. Definitions, shared by the page, the API and the CSV export:

- The window's requests are the approvals created in ``[now - window, now]``.
- Outcomes: a person's decision counts as approve, edit, reject or respond; an approval closed
  without a person (expiry by ``system:timeout``, even when the tier's default is approve, or
  a cancelled run) counts as expired. Rates are shares of the closed requests, so they add up
  to 1; requests still pending have no outcome yet.
- Time to decision is ``decided_at - created_at`` of decisions made by a person. Percentiles
  use the nearest-rank method: the p-th percentile of n sorted values is the value at rank
  ``ceil(p * n / 100)``. That is Postgres' ``percentile_disc``; on SQLite the same rank is
  picked with ``ROW_NUMBER()`` and ``COUNT(*)`` window functions.
- The reviewer of an approval is its final decider (``decided_by``: for a quorum, the person
  whose vote completed it). Approvals without one are grouped under their system label
  (``system:timeout``, ``system:cancel``) or, while pending, under "(undecided)".
- Queue depth and queue age are about now, whatever the window: every pending approval.
- Fatigue: a reviewer or tool whose approve rate is above METRICS_FATIGUE_APPROVAL_RATE and
  whose median time to decision is under METRICS_FATIGUE_MEDIAN_SECONDS.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import (
    Aggregate,
    Case,
    CharField,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Min,
    Q,
    QuerySet,
    Value,
    When,
)
from django.db.models.functions import TruncDate
from django.utils import timezone

from approvals.models import AgentRun, ApprovalRequest

MANAGERS_GROUP = "managers"
GROUPS: tuple[str, ...] = ("tier", "tool", "agent", "reviewer")
GROUP_DEFAULT = "tier"
WINDOW_DEFAULT = 30
WINDOW_MIN = 1
WINDOW_MAX = 365
PERCENTILES: tuple[int, ...] = (50, 90, 95)
OUTCOMES: tuple[str, ...] = ("approve", "edit", "reject", "respond", "expired")
UNDECIDED = "(undecided)"

# Upper bounds (exclusive) of the histogram buckets; the last bucket is open-ended.
TIME_BUCKETS: tuple[tuple[str, dt.timedelta | None], ...] = (
    ("<10s", dt.timedelta(seconds=10)),
    ("10-30s", dt.timedelta(seconds=30)),
    ("30s-1m", dt.timedelta(minutes=1)),
    ("1-5m", dt.timedelta(minutes=5)),
    ("5-15m", dt.timedelta(minutes=15)),
    ("15m-1h", dt.timedelta(hours=1)),
    ("1-4h", dt.timedelta(hours=4)),
    ("4-24h", dt.timedelta(hours=24)),
    ("≥24h", None),
)
QUEUE_AGE_BUCKETS: tuple[tuple[str, dt.timedelta | None], ...] = (
    ("< 5 min", dt.timedelta(minutes=5)),
    ("5-30 min", dt.timedelta(minutes=30)),
    ("30 min-2 h", dt.timedelta(hours=2)),
    ("2-8 h", dt.timedelta(hours=8)),
    ("8-24 h", dt.timedelta(hours=24)),
    ("≥ 24 h", None),
)

Status = ApprovalRequest.Status
PERSON = Q(decided_by__isnull=False)
CLOSED = ~Q(status=Status.PENDING)
OUTCOME_FILTERS: dict[str, Q] = {
    "approve": Q(status=Status.APPROVED) & PERSON,
    "edit": Q(status=Status.EDITED) & PERSON,
    "reject": Q(status=Status.REJECTED) & PERSON,
    "respond": Q(status=Status.RESPONDED) & PERSON,
    "expired": CLOSED & Q(decided_by__isnull=True),
}


def user_may_view_metrics(user: Any) -> bool:
    """Superusers and members of the "managers" group."""
    if not (user.is_authenticated and user.is_active):
        return False
    return user.is_superuser or user.groups.filter(name=MANAGERS_GROUP).exists()


def fatigue_thresholds() -> tuple[float, float]:
    """(approve rate above which, median seconds under which) a reviewer or tool is flagged."""
    return (
        float(settings.METRICS_FATIGUE_APPROVAL_RATE),
        float(settings.METRICS_FATIGUE_MEDIAN_SECONDS),
    )


# --- result types ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bucket:
    label: str
    count: int


@dataclass(frozen=True)
class DayCounts:
    date: dt.date
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass
class MetricsRow:
    """One group's numbers (or the whole window's, with key "")."""

    key: str
    requests: int = 0
    pending: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    percentiles: dict[int, float | None] = field(default_factory=lambda: dict.fromkeys(PERCENTILES))
    escalated: int = 0
    reminded: int = 0
    queue_depth: int = 0
    oldest_pending_at: dt.datetime | None = None
    oldest_pending_age_seconds: float | None = None
    fatigue: bool = False

    @property
    def label(self) -> str:
        return self.key or UNDECIDED

    @property
    def closed(self) -> int:
        return sum(self.outcomes.values())

    @property
    def person_decisions(self) -> int:
        return self.closed - self.outcomes["expired"]

    @property
    def rates(self) -> dict[str, float | None]:
        closed = self.closed
        return {name: (count / closed if closed else None) for name, count in self.outcomes.items()}

    @property
    def median_seconds(self) -> float | None:
        return self.percentiles[50]


@dataclass(frozen=True)
class FatigueFlag:
    dimension: str  # "reviewer" or "tool"
    key: str
    approve_rate: float
    median_seconds: float
    decisions: int


@dataclass
class MetricsReport:
    window_days: int
    group: str
    since: dt.datetime
    now: dt.datetime
    fatigue_approval_rate: float
    fatigue_median_seconds: float
    total: MetricsRow
    rows: list[MetricsRow]
    fatigue: list[FatigueFlag]
    decisions_per_day: list[DayCounts]
    time_to_decision: list[Bucket]
    queue_age: list[Bucket]
    runs_by_status: dict[str, int]


# --- expressions ---------------------------------------------------------------------------------


def _duration() -> ExpressionWrapper:
    return ExpressionWrapper(F("decided_at") - F("created_at"), output_field=DurationField())


def _group_expression(group: str) -> Any:
    if group == "tier":
        return F("tier")
    if group == "tool":
        return F("tool")
    if group == "agent":
        return F("run__agent")
    if group == "reviewer":
        return Case(
            When(decided_by__isnull=False, then=F("decided_by__username")),
            When(status=Status.PENDING, then=Value("")),
            default=F("decided_by_label"),
            output_field=CharField(),
        )
    raise ValueError(f"unknown group {group!r}; expected one of {', '.join(GROUPS)}")


def _outcome_expression() -> Case:
    return Case(
        *(When(condition, then=Value(name)) for name, condition in OUTCOME_FILTERS.items()),
        default=Value(""),
        output_field=CharField(),
    )


def _window(*, since: dt.datetime, now: dt.datetime) -> QuerySet[ApprovalRequest]:
    return ApprovalRequest.objects.filter(created_at__gte=since, created_at__lte=now).order_by()


def _seconds(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return int(value) / 1_000_000  # SQLite: durations are microseconds


def _on_postgres() -> bool:
    return connection.vendor == "postgresql"


# Measured in bench/metrics_1m.py: sorting a month of a million approvals needs more than
# Postgres' default 4 MB to stay in memory, and JIT compilation costs more than it saves here.
POSTGRES_SETTINGS = {"work_mem": "64MB", "jit": "off"}


def postgres_tune() -> None:
    """SET LOCAL the settings above (Postgres only, inside a transaction)."""
    if _on_postgres():
        with connection.cursor() as cursor:
            for name, value in POSTGRES_SETTINGS.items():
                cursor.execute(f"SET LOCAL {name} = '{value}'")


def _counts() -> dict[str, Aggregate]:
    aggregates: dict[str, Aggregate] = {
        "requests": Count("id"),
        "pending": Count("id", filter=Q(status=Status.PENDING)),
        "escalated": Count("id", filter=Q(escalated_at__isnull=False)),
        "reminded": Count("id", filter=Q(reminded_at__isnull=False)),
    }
    for name, condition in OUTCOME_FILTERS.items():
        aggregates[f"o_{name}"] = Count("id", filter=condition)
    return aggregates


def _row_fill(row: MetricsRow, values: dict[str, Any]) -> MetricsRow:
    row.requests = values["requests"]
    row.pending = values["pending"]
    row.escalated = values["escalated"]
    row.reminded = values["reminded"]
    row.outcomes = {name: values[f"o_{name}"] for name in OUTCOMES}
    if "p50" in values:
        row.percentiles = {p: _seconds(values[f"p{p}"]) for p in PERCENTILES}
    return row


def _percentiles_by_rank(queryset: QuerySet) -> dict[str, dict[int, float | None]]:
    """Nearest-rank percentiles per group "g" of durations "d", with window functions.

    ``queryset`` selects exactly the columns g and d; the rank ``ceil(p * n / 100)`` is
    computed in integers as ``(p * n + 99) / 100`` so it matches ``percentile_disc``.
    """
    sql, params = queryset.query.sql_with_params()
    picks = ", ".join(
        f"MAX(CASE WHEN rn = ({p} * n + 99) / 100 THEN d END) AS p{p}" for p in PERCENTILES
    )
    ranked = (
        "SELECT g, d, ROW_NUMBER() OVER (PARTITION BY g ORDER BY d) AS rn, "
        f"COUNT(*) OVER (PARTITION BY g) AS n FROM ({sql}) AS base"
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT g, {picks} FROM ({ranked}) AS ranked GROUP BY g", params)
        return {
            (g if g is not None else ""): {
                p: _seconds(value) for p, value in zip(PERCENTILES, values, strict=True)
            }
            for g, *values in cursor.fetchall()
        }


def _rows_by_queries(
    *, group: str | None, since: dt.datetime, now: dt.datetime
) -> list[MetricsRow]:
    """Any database: one aggregate query, and one window-function query for the percentiles."""
    group_expression = _group_expression(group) if group else Value("")
    base = _window(since=since, now=now).annotate(duration=_duration())
    if group:
        values = base.annotate(g=group_expression).values("g").annotate(**_counts())
        found = {(v["g"] or ""): v for v in values}
    else:
        found = {"": base.aggregate(**_counts())}
    rows = {key: _row_fill(MetricsRow(key=key), values) for key, values in found.items()}
    durations = (
        base.filter(PERSON).annotate(g=group_expression, d=F("duration")).values_list("g", "d")
    )
    for key, percentiles in _percentiles_by_rank(durations).items():
        if key in rows:
            rows[key].percentiles = percentiles
    return list(rows.values())


def _rows_by_grouping_sets(
    *, groups: tuple[str | None, ...], since: dt.datetime, now: dt.datetime
) -> dict[str | None, list[MetricsRow]]:
    """Postgres: every grouping (None: the whole window) in one pass over the window's rows.

    ``GROUP BY GROUPING SETS`` over the window's rows; the percentiles are
    ``percentile_disc`` (nearest rank), which sorts each group's durations once for all three.
    """
    dimensions = [group for group in groups if group]
    keys = {f"g{index}": _group_expression(group) for index, group in enumerate(dimensions)}
    base = (
        _window(since=since, now=now)
        .annotate(
            **keys,
            c_status=F("status"),
            c_outcome=_outcome_expression(),
            c_decider=F("decided_by_id"),
            c_escalated=F("escalated_at"),
            c_reminded=F("reminded_at"),
            c_duration=_duration(),
        )
        .values_list(
            *keys, "c_status", "c_outcome", "c_decider", "c_escalated", "c_reminded", "c_duration"
        )
    )
    sql, params = base.query.sql_with_params()
    # Literals below are this module's constants (lowercase words), never user input.
    assert all(name.isalpha() for name in (*OUTCOMES, Status.PENDING))
    aggregates = [
        "COUNT(*)",
        f"COUNT(*) FILTER (WHERE c_status = '{Status.PENDING}')",
        "COUNT(c_escalated)",
        "COUNT(c_reminded)",
        *(f"COUNT(*) FILTER (WHERE c_outcome = '{name}')" for name in OUTCOMES),
        *(
            f"percentile_disc({p / 100:.2f}) WITHIN GROUP (ORDER BY c_duration) "
            "FILTER (WHERE c_decider IS NOT NULL)"
            for p in PERCENTILES
        ),
    ]
    grouping = [f"GROUPING({key})" for key in keys]
    sets = [f"({key})" for key in keys] + (["()"] if None in groups else [])
    query = (
        f"SELECT {', '.join([*grouping, *keys, *aggregates])} FROM ({sql}) AS base "
        f"GROUP BY GROUPING SETS ({', '.join(sets)})"
    )
    found: dict[str | None, list[MetricsRow]] = {group: [] for group in groups}
    names = ["requests", "pending", "escalated", "reminded"]
    names += [f"o_{name}" for name in OUTCOMES] + [f"p{p}" for p in PERCENTILES]
    with transaction.atomic(), connection.cursor() as cursor:
        postgres_tune()
        cursor.execute(query, params)
        for record in cursor.fetchall():
            flags, values = record[: len(keys)], record[len(keys) :]
            key_values, aggregate_values = values[: len(keys)], values[len(keys) :]
            grouped = [index for index, flag in enumerate(flags) if flag == 0]
            group = dimensions[grouped[0]] if grouped else None
            key = (key_values[grouped[0]] or "") if grouped else ""
            row = _row_fill(MetricsRow(key=key), dict(zip(names, aggregate_values, strict=True)))
            found[group].append(row)
    return found


def _rows_by_group(
    *, groups: tuple[str | None, ...], since: dt.datetime, now: dt.datetime
) -> dict[str | None, list[MetricsRow]]:
    """The window's rows for each grouping, without queue figures or fatigue flags."""
    if _on_postgres():
        found = _rows_by_grouping_sets(groups=groups, since=since, now=now)
    else:
        found = {group: _rows_by_queries(group=group, since=since, now=now) for group in groups}
    if None in found and not found[None]:
        found[None] = [MetricsRow(key="")]
    return found


def _queue_fill(rows: list[MetricsRow], *, group: str | None, now: dt.datetime) -> list[MetricsRow]:
    """Add queue depth and the oldest pending approval (now, any age) to each group's row."""
    pending = ApprovalRequest.objects.filter(status=Status.PENDING).order_by()
    if group:
        found = {
            (v["g"] or ""): v
            for v in pending.annotate(g=_group_expression(group))
            .values("g")
            .annotate(depth=Count("id"), oldest=Min("created_at"))
        }
    else:
        found = {"": pending.aggregate(depth=Count("id"), oldest=Min("created_at"))}
    by_key = {row.key: row for row in rows}
    for key, values in found.items():
        if not values["depth"]:
            continue
        row = by_key.get(key)
        if row is None:  # pending, but nothing of this group was requested in the window
            row = by_key[key] = MetricsRow(key=key)
        row.queue_depth = values["depth"]
        row.oldest_pending_at = values["oldest"]
        row.oldest_pending_age_seconds = (now - values["oldest"]).total_seconds()
    return list(by_key.values())


def _table(rows: list[MetricsRow], *, group: str, now: dt.datetime) -> list[MetricsRow]:
    rows = _queue_fill(rows, group=group, now=now)
    if group in ("reviewer", "tool"):
        rate, median = fatigue_thresholds()
        for row in rows:
            row.fatigue = _is_fatigued(row, rate=rate, median=median)
    rows.sort(key=lambda row: (-row.requests, -row.queue_depth, row.label))
    return rows


def metrics_rows(*, group: str, since: dt.datetime, now: dt.datetime) -> list[MetricsRow]:
    """The table: one row per group, most requests first; fatigue flags for reviewer and tool."""
    rows = _rows_by_group(groups=(group,), since=since, now=now)[group]
    return _table(rows, group=group, now=now)


def metrics_total(*, since: dt.datetime, now: dt.datetime) -> MetricsRow:
    """The whole window in one row (key ""), with the queue now."""
    rows = _rows_by_group(groups=(None,), since=since, now=now)[None]
    [row] = _queue_fill(rows, group=None, now=now)
    return row


def _is_fatigued(row: MetricsRow, *, rate: float, median: float) -> bool:
    approve_rate = row.rates["approve"]
    return (
        approve_rate is not None
        and row.median_seconds is not None
        and approve_rate > rate
        and row.median_seconds < median
    )


def metrics_fatigue(
    *,
    since: dt.datetime,
    now: dt.datetime,
    computed: dict[str | None, list[MetricsRow]] | None = None,
) -> list[FatigueFlag]:
    """Reviewers and tools that approve almost everything, fast. ``computed`` reuses rows."""
    computed = dict(computed or {})
    missing = tuple(d for d in ("reviewer", "tool") if d not in computed)
    if missing:
        computed.update(_rows_by_group(groups=missing, since=since, now=now))
    rate, median = fatigue_thresholds()
    flags: list[FatigueFlag] = []
    for dimension in ("reviewer", "tool"):
        for row in sorted(computed[dimension], key=lambda row: row.label):
            if _is_fatigued(row, rate=rate, median=median):
                flags.append(
                    FatigueFlag(
                        dimension=dimension,
                        key=row.key,
                        approve_rate=row.rates["approve"] or 0.0,
                        median_seconds=row.median_seconds or 0.0,
                        decisions=row.person_decisions,
                    )
                )
    return flags


def metrics_time_to_decision(*, since: dt.datetime, now: dt.datetime) -> list[Bucket]:
    """Histogram of a person's time to decision over the window's requests."""
    aggregates: dict[str, Aggregate] = {}
    lower: dt.timedelta | None = None
    for index, (_, upper) in enumerate(TIME_BUCKETS):
        condition = PERSON
        if lower is not None:
            condition &= Q(duration__gte=lower)
        if upper is not None:
            condition &= Q(duration__lt=upper)
        aggregates[f"b{index}"] = Count("id", filter=condition)
        lower = upper
    values = _window(since=since, now=now).annotate(duration=_duration()).aggregate(**aggregates)
    return [Bucket(label, values[f"b{i}"]) for i, (label, _) in enumerate(TIME_BUCKETS)]


def metrics_queue_age(*, now: dt.datetime) -> list[Bucket]:
    """Pending approvals by age, now."""
    aggregates: dict[str, Aggregate] = {}
    younger_than: dt.timedelta | None = None
    for index, (_, older_bound) in enumerate(QUEUE_AGE_BUCKETS):
        condition = Q()
        if younger_than is not None:
            condition &= Q(created_at__lte=now - younger_than)
        if older_bound is not None:
            condition &= Q(created_at__gt=now - older_bound)
        aggregates[f"b{index}"] = Count("id", filter=condition) if condition else Count("id")
        younger_than = older_bound
    values = (
        ApprovalRequest.objects.filter(status=Status.PENDING).order_by().aggregate(**aggregates)
    )
    return [Bucket(label, values[f"b{i}"]) for i, (label, _) in enumerate(QUEUE_AGE_BUCKETS)]


def metrics_decisions_per_day(*, since: dt.datetime, now: dt.datetime) -> list[DayCounts]:
    """Closed approvals per day of their decision (console time zone), by outcome."""
    found = (
        ApprovalRequest.objects.filter(decided_at__gte=since, decided_at__lte=now)
        .exclude(status=Status.PENDING)
        .order_by()
        .annotate(day=TruncDate("decided_at"), outcome=_outcome_expression())
        .values("day", "outcome")
        .annotate(n=Count("id"))
    )
    days: dict[dt.date, dict[str, int]] = {}
    day = timezone.localdate(since)
    while day <= timezone.localdate(now):
        days[day] = dict.fromkeys(OUTCOMES, 0)
        day += dt.timedelta(days=1)
    for item in found:
        if item["day"] in days and item["outcome"] in OUTCOMES:
            days[item["day"]][item["outcome"]] += item["n"]
    return [DayCounts(date=date, counts=counts) for date, counts in days.items()]


def metrics_runs_by_status(*, since: dt.datetime, now: dt.datetime) -> dict[str, int]:
    """Runs started in the window, by status (dead runs included)."""
    counts = dict.fromkeys(AgentRun.Status.values, 0)
    for item in (
        AgentRun.objects.filter(created_at__gte=since, created_at__lte=now)
        .order_by()
        .values("status")
        .annotate(n=Count("id"))
    ):
        counts[item["status"]] = item["n"]
    return counts


def metrics_report(
    *, window_days: int = WINDOW_DEFAULT, group: str = GROUP_DEFAULT, now: dt.datetime | None = None
) -> MetricsReport:
    """Everything the metrics page, the API and the CSV export show."""
    if group not in GROUPS:
        raise ValueError(f"unknown group {group!r}; expected one of {', '.join(GROUPS)}")
    if not WINDOW_MIN <= window_days <= WINDOW_MAX:
        raise ValueError(f"window_days must be in {WINDOW_MIN}..{WINDOW_MAX}")
    now = now or timezone.now()
    if not _on_postgres():
        # No transaction: SQLite's IMMEDIATE transactions would take the write lock.
        return _report(window_days=window_days, group=group, now=now)
    with transaction.atomic():  # SET LOCAL applies to every query of the report
        postgres_tune()
        return _report(window_days=window_days, group=group, now=now)


def _report(*, window_days: int, group: str, now: dt.datetime) -> MetricsReport:
    since = now - dt.timedelta(days=window_days)
    # One pass computes the chosen grouping, the two the fatigue signal needs, and the total.
    computed = _rows_by_group(
        groups=tuple(dict.fromkeys((group, "reviewer", "tool", None))), since=since, now=now
    )
    [total] = _queue_fill(computed[None], group=None, now=now)
    rate, median = fatigue_thresholds()
    return MetricsReport(
        window_days=window_days,
        group=group,
        since=since,
        now=now,
        fatigue_approval_rate=rate,
        fatigue_median_seconds=median,
        total=total,
        fatigue=metrics_fatigue(since=since, now=now, computed=computed),
        rows=_table(computed[group], group=group, now=now),
        decisions_per_day=metrics_decisions_per_day(since=since, now=now),
        time_to_decision=metrics_time_to_decision(since=since, now=now),
        queue_age=metrics_queue_age(now=now),
        runs_by_status=metrics_runs_by_status(since=since, now=now),
    )


# --- serialisation (API and CSV share it) ------------------------------------------------------


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
            }
            for flag in report.fatigue
        ],
        "decisions_per_day": [{"date": day.date, **day.counts} for day in report.decisions_per_day],
        "time_to_decision": [{"label": b.label, "count": b.count} for b in report.time_to_decision],
        "queue_age": [{"label": b.label, "count": b.count} for b in report.queue_age],
        "runs_by_status": dict(report.runs_by_status),
    }


CSV_HEADER: tuple[str, ...] = (
    "group",
    "key",
    "requests",
    "pending",
    "closed",
    *OUTCOMES,
    *(f"{name}_rate" for name in OUTCOMES),
    *(f"p{p}_seconds" for p in PERCENTILES),
    "escalated",
    "reminded",
    "queue_depth",
    "oldest_pending_age_seconds",
    "fatigue",
)


# Spreadsheet programs run cells that start with these as formulas (keys are user data).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_text(value: str) -> str:
    return "'" + value if value.startswith(_FORMULA_START) else value


def report_csv_rows(report: MetricsReport) -> list[list[Any]]:
    """The table as CSV rows: a header, one line per group, then the whole window ("(all)")."""

    def line(group: str, row: MetricsRow) -> list[Any]:
        rates = row.rates
        return [
            group,
            _csv_text(row.key),
            row.requests,
            row.pending,
            row.closed,
            *(row.outcomes[name] for name in OUTCOMES),
            *("" if rates[name] is None else f"{rates[name]:.4f}" for name in OUTCOMES),
            *(
                "" if row.percentiles[p] is None else f"{row.percentiles[p]:.3f}"
                for p in PERCENTILES
            ),
            row.escalated,
            row.reminded,
            row.queue_depth,
            ""
            if row.oldest_pending_age_seconds is None
            else f"{row.oldest_pending_age_seconds:.0f}",
            "yes" if row.fatigue else "no",
        ]

    return [
        list(CSV_HEADER),
        *(line(report.group, row) for row in report.rows),
        line("(all)", report.total),
    ]
