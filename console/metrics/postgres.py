"""Metrics SQL for Postgres only: session tuning and every grouping in one GROUPING SETS pass."""

from __future__ import annotations

import datetime as dt

from django.db import connection, transaction
from django.db.models import F

from console.metrics.definitions import OUTCOMES, PERCENTILES, MetricsRow, Status
from console.metrics.portable import (
    duration,
    group_expression,
    outcome_expression,
    row_fill,
    window,
)


def on_postgres() -> bool:
    """Whether the default database is Postgres (otherwise the portable queries are used)."""
    return connection.vendor == "postgresql"


# Measured in bench/metrics.py: sorting a month of a million approvals needs more than
# Postgres' default 4 MB to stay in memory, and JIT compilation costs more than it saves here.
POSTGRES_SETTINGS = {"work_mem": "64MB", "jit": "off"}
# A report from the rollups reads small index ranges (its largest, runs by status, counts one
# index range): starting parallel workers costs more than it saves (bench/metrics.py: a 7-day
# report 55 -> 37 ms, 90 days 99-118 -> 87 ms, at 1M approvals).
ROLLUP_SETTINGS = {"max_parallel_workers_per_gather": "0"}


def postgres_tune(settings: dict[str, str] | None = None) -> None:
    """SET LOCAL ``settings`` (default: POSTGRES_SETTINGS; Postgres only, in a transaction)."""
    if on_postgres():
        with connection.cursor() as cursor:
            for name, value in (POSTGRES_SETTINGS if settings is None else settings).items():
                cursor.execute(f"SET LOCAL {name} = '{value}'")


def rows_by_grouping_sets(
    *, groups: tuple[str | None, ...], since: dt.datetime, now: dt.datetime
) -> dict[str | None, list[MetricsRow]]:
    """Postgres: every grouping (None: the whole window) in one pass over the window's rows.

    ``GROUP BY GROUPING SETS`` over the window's rows; the percentiles are
    ``percentile_disc`` (nearest rank), which sorts each group's durations once for all three.
    """
    dimensions = [group for group in groups if group]
    keys = {f"g{index}": group_expression(group) for index, group in enumerate(dimensions)}
    base = (
        window(since=since, now=now)
        .annotate(
            **keys,
            c_status=F("status"),
            c_outcome=outcome_expression(),
            c_decider=F("decided_by_id"),
            c_escalated=F("escalated_at"),
            c_reminded=F("reminded_at"),
            c_duration=duration(),
        )
        .values_list(
            *keys, "c_status", "c_outcome", "c_decider", "c_escalated", "c_reminded", "c_duration"
        )
    )
    sql, params = base.query.sql_with_params()
    # Literals below are the package's constants (lowercase words), never user input.
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
            row = row_fill(MetricsRow(key=key), dict(zip(names, aggregate_values, strict=True)))
            found[group].append(row)
    return found
