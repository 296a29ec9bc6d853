"""Rebuilding the metrics rollups (approvals/rollups.py) from the approvals table.

``manage.py metrics_backfill`` and migration 0016 call ``rollups_rebuild``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from approvals.models import AgentRun, ApprovalRequest, Canary
from approvals.rollup_models import (
    MetricsCount,
    MetricsHistogram,
    PendingApprovalCount,
    RunStatusCount,
)
from approvals.rollup_pending import pending_rebuild
from approvals.rollup_runs import run_status_rebuild
from approvals.rollups import (
    _PERSON_OUTCOMES,
    GAMMA,
    LEVELS,
    MIN_SECONDS,
    TTD_BAR_BOUNDS,
    ZERO_BUCKET,
    Status,
    _cells,
    _count_rows,
    _histograms,
    _upsert,
    day_of,
)


def _canaries_exist() -> bool:
    """Whether the canary table exists yet (migration 0018 rebuilds before 0028 made it)."""
    return Canary._meta.db_table in connection.introspection.table_names()


def _canary_q() -> Q:
    if not _canaries_exist():
        return Q(pk__in=[])
    return Q(Exists(Canary.objects.filter(approval_id=OuterRef("pk"))))


def rollups_rebuild(*, batch: int = 50_000, progress: Callable[[str], Any] = print) -> int:
    """Rebuild the rollups from every closed approval; returns how many were counted.

    One transaction: the old rows are deleted and the new ones written together, so a reader
    sees either. Level 0 on Postgres: ``INSERT ... SELECT ... GROUP BY`` over the approvals;
    on SQLite the approvals are streamed in ``batch``-sized chunks in creation order, so each
    day's cells are complete once the stream has passed it (the console time zone's decision
    day needs Python there). Each higher level is one ``INSERT ... SELECT ... GROUP BY`` over
    the level below. On Postgres the rollup tables are locked meanwhile: a decision made during
    the rebuild waits, then counts once. The runs by status per day (approvals/rollup_runs.py)
    are counted again afterwards, in a transaction of their own.
    """
    started = time.perf_counter()
    closed = (
        ApprovalRequest.objects.exclude(status=Status.PENDING)
        .exclude(_canary_q())  # canaries are not requests
        .order_by("created_at")
        .values_list(
            "created_at",
            "decided_at",
            "status",
            "tier",
            "tool",
            "run__agent",
            "decided_by_id",
            "decided_by__username",
            "decided_by_label",
            "escalated_at",
            "reminded_at",
        )
    )
    count_table = MetricsCount._meta.db_table
    histogram_table = MetricsHistogram._meta.db_table
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"LOCK TABLE {count_table}, {histogram_table} IN EXCLUSIVE MODE")
        MetricsCount.objects.all().delete()
        MetricsHistogram.objects.all().delete()
        if connection.vendor == "postgresql":
            total = _level0_by_sql()
            progress(f"  level 0: {total:,} approvals ({time.perf_counter() - started:.1f} s)")
        else:
            total = _level0_by_python(closed, batch=batch, started=started, progress=progress)
        _levels_above()
    # Migration 0016 runs this before 0017 created the run status tables (0017 fills them).
    # Its own transaction, after the rollup tables' locks are released: a run cancel updates
    # the run and then the rollups, so SHARE on the runs while holding the rollup tables'
    # EXCLUSIVE lock would deadlock with it.
    tables = connection.introspection.table_names()
    if RunStatusCount._meta.db_table in tables:
        with transaction.atomic():
            run_status_rebuild()
    if PendingApprovalCount._meta.db_table in tables:  # migration 0018 and after
        with transaction.atomic():
            pending_rebuild()
    progress(f"  {total:,} approvals counted in {time.perf_counter() - started:.1f} s")
    return total


def _level0_by_python(closed: Any, *, batch: int, started: float, progress: Callable) -> int:
    """Level 0 from the approvals streamed in creation order (any database)."""
    total = 0
    counts: Counter = Counter()
    buckets: Counter = Counter()
    by_decision_day: Counter = Counter()  # keyed by another day: written at the end
    current, unwritten = None, 0
    for row in closed.iterator(chunk_size=batch):
        created, decided, status, tier, tool, agent, decider, username, label, esc, rem = row
        day = day_of(created)
        if day != current and unwritten >= batch:  # the days before are complete
            _insert(counts=counts, buckets=buckets, decision_days=by_decision_day)
            unwritten = 0
            progress(f"  {total:,} approvals ({time.perf_counter() - started:.1f} s)")
        current = day
        unwritten += 1
        _cells(
            created_at=created,
            decided_at=decided,
            status=status,
            keys={
                "tier": tier,
                "tool": tool,
                "agent": agent,
                "reviewer": username if decider is not None else label,
            },
            person=decider is not None,
            escalated=esc is not None,
            reminded=rem is not None,
            counts=counts,
            buckets=buckets,
            levels=range(1),
        )
        total += 1
    _insert(counts=counts, buckets=buckets, decision_days=by_decision_day)
    _upsert(counts=by_decision_day, buckets=Counter())
    return total


def _levels_above() -> None:
    """Each level above 0: one INSERT ... SELECT ... GROUP BY over the level below."""
    count_table = MetricsCount._meta.db_table
    histogram_table = MetricsHistogram._meta.db_table
    if connection.vendor == "postgresql":
        each, value, collect = "jsonb_each_text", "e.value::bigint", "jsonb_object_agg"
    else:
        each, value, collect = "json_each", "e.value", "json_group_object"
    with connection.cursor() as cursor:
        for level in range(1, LEVELS):  # integers of ours, never input
            cursor.execute(
                f"INSERT INTO {count_table} "
                "(level, block, dimension, group_key, outcome, n, escalated, reminded) "
                f"SELECT {level}, block / 2, dimension, group_key, outcome, "
                "SUM(n), SUM(escalated), SUM(reminded) "
                f"FROM {count_table} WHERE level = {level - 1} AND dimension <> 'day' "
                "GROUP BY block / 2, dimension, group_key, outcome"
            )
            cursor.execute(
                f"INSERT INTO {histogram_table} (level, block, dimension, group_key, counts) "
                f"SELECT {level}, block, dimension, group_key, {collect}(bucket, n) FROM ("
                f"SELECT h.block / 2 AS block, h.dimension, h.group_key, e.key AS bucket, "
                f"SUM({value}) AS n FROM {histogram_table} h, {each}(h.counts) e "
                f"WHERE h.level = {level - 1} GROUP BY h.block / 2, h.dimension, h.group_key, "
                "e.key) AS b GROUP BY block, dimension, group_key"
            )


def _level0_by_sql() -> int:
    """Postgres: level 0 in two ``INSERT ... SELECT ... GROUP BY`` over the closed approvals
    (the same definitions as ``_cells``, in SQL), and the decision days in a third."""
    approvals = ApprovalRequest._meta.db_table
    count_table = MetricsCount._meta.db_table
    histogram_table = MetricsHistogram._meta.db_table
    outcome = (
        "CASE WHEN a.decided_by_id IS NULL THEN 'expired' "
        + "".join(
            f"WHEN a.status = '{status}' THEN '{name}' "
            for status, name in _PERSON_OUTCOMES.items()
        )
        + "ELSE 'expired' END"
    )
    bars = (
        "CASE "
        + "".join(
            f"WHEN seconds < {bound} THEN '{index}' " for index, bound in enumerate(TTD_BAR_BOUNDS)
        )
        + f"ELSE '{len(TTD_BAR_BOUNDS)}' END"
    )
    not_canary = (  # canaries are not requests
        f" AND NOT EXISTS (SELECT 1 FROM {Canary._meta.db_table} c WHERE c.approval_id = a.id)"
        if _canaries_exist()
        else ""
    )
    closed = (
        "SELECT (a.created_at AT TIME ZONE 'UTC')::date - DATE '1970-01-01' AS day, "
        f"{outcome} AS outcome, a.decided_by_id IS NOT NULL AS person, "
        "(a.escalated_at IS NOT NULL)::int AS escalated, "
        "(a.reminded_at IS NOT NULL)::int AS reminded, "
        "EXTRACT(EPOCH FROM a.decided_at - a.created_at)::float8 AS seconds, "
        "unnest(ARRAY['tier', 'tool', 'agent', 'reviewer']) AS dimension, "
        "unnest(ARRAY[a.tier, a.tool, r.agent, "
        "CASE WHEN a.decided_by_id IS NOT NULL THEN u.username ELSE a.decided_by_label END]) "
        "AS group_key "
        f"FROM {approvals} a JOIN {AgentRun._meta.db_table} r ON r.id = a.run_id "
        "LEFT JOIN auth_user u ON u.id = a.decided_by_id WHERE a.status <> 'pending'" + not_canary
    )
    bucket = (
        f"CASE WHEN seconds < {MIN_SECONDS} THEN {ZERO_BUCKET} "
        f"ELSE ceil(ln(seconds) / ln({GAMMA!r}))::int END"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {count_table} "
            "(level, block, dimension, group_key, outcome, n, escalated, reminded) "
            "SELECT 0, day, dimension, group_key, outcome, COUNT(*), SUM(escalated), "
            f"SUM(reminded) FROM ({closed}) AS c GROUP BY day, dimension, group_key, outcome "
            "UNION ALL "
            f"SELECT 0, day, 'ttd', {bars}, '', COUNT(*), 0, 0 FROM ({closed}) AS c "
            f"WHERE person AND dimension = 'tier' GROUP BY day, {bars}"
        )
        cursor.execute(
            f"INSERT INTO {histogram_table} (level, block, dimension, group_key, counts) "
            "SELECT 0, day, dimension, group_key, jsonb_object_agg(bucket, n) FROM ("
            f"SELECT day, dimension, group_key, {bucket} AS bucket, COUNT(*) AS n "
            f"FROM ({closed}) AS c WHERE person GROUP BY day, dimension, group_key, {bucket}"
            ") AS b GROUP BY day, dimension, group_key"
        )
        cursor.execute(
            f"INSERT INTO {count_table} "
            "(level, block, dimension, group_key, outcome, n, escalated, reminded) "
            "SELECT 0, (a.decided_at AT TIME ZONE %s)::date - DATE '1970-01-01', 'day', '', "
            f"{outcome}, COUNT(*), 0, 0 FROM {approvals} a "
            f"WHERE a.status <> 'pending' AND a.decided_at IS NOT NULL{not_canary} GROUP BY 2, 5",
            [str(timezone.get_current_timezone())],
        )
        cursor.execute(f"SELECT COUNT(*) FROM {approvals} WHERE status <> 'pending'")
        return cursor.fetchone()[0]


def _insert(*, counts: Counter, buckets: Counter, decision_days: Counter) -> None:
    """Write complete level-0 cells with plain INSERTs and clear them; the decision-day cells
    move to ``decision_days`` (their day is not the creation day)."""
    for cell in [cell for cell in counts if cell[2] == "day"]:
        decision_days[cell] += counts.pop(cell)
    MetricsCount.objects.bulk_create(
        [
            MetricsCount(
                level=level,
                block=block,
                dimension=dimension,
                group_key=key,
                outcome=outcome,
                n=n,
                escalated=escalated,
                reminded=reminded,
            )
            for level, block, dimension, key, outcome, n, escalated, reminded in _count_rows(counts)
        ],
        batch_size=5000,
    )
    MetricsHistogram.objects.bulk_create(
        [
            MetricsHistogram(
                level=level, block=block, dimension=dimension, group_key=key, counts=histogram
            )
            for (level, block, dimension, key), histogram in _histograms(buckets).items()
        ],
        batch_size=5000,
    )
    counts.clear()
    buckets.clear()
