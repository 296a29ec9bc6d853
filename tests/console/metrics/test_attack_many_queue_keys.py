"""Attack: queue_from_cells() reads the oldest pending approval of every key of the grouping as
one scalar subquery per key, all in one SELECT. Postgres refuses a target list of more than 1664
entries and SQLite a result of more than 2000 columns (SQLITE_MAX_COLUMN), so a queue holding
approvals of ~2000 distinct tools (tool names come from whatever the agents interrupt with)
makes the rollup report, the metrics page, its API and CSV fail with a 500 for group=tool,
where the live count it replaced had no such limit."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection

from approvals.models import ApprovalRequest
from console.metrics.report import metrics_report
from tests.support.factories import ApprovalFactory, RunFactory

NOW = dt.datetime(2026, 3, 15, 12, 0, tzinfo=dt.UTC)
TOOLS = 2100


@pytest.mark.django_db
def test_the_rollup_report_survives_a_queue_of_many_distinct_tools(alice):
    run = RunFactory(requested_by=alice)
    template = ApprovalFactory.build(run=run)
    rows = []
    for index in range(TOOLS):
        fields = {
            f.attname: getattr(template, f.attname)
            for f in ApprovalRequest._meta.concrete_fields
            if not f.primary_key
        }
        fields.update(
            tool=f"tool_{index:05d}",
            interrupt_id=f"i{index}",
            created_at=NOW - dt.timedelta(hours=1, seconds=index),
        )
        rows.append(ApprovalRequest(**fields))
    ApprovalRequest.objects.bulk_create(rows, batch_size=200)

    exact = metrics_report(window_days=30, group="tool", now=NOW, source="rows")
    report = metrics_report(window_days=30, group="tool", now=NOW, source="rollups")

    def queue(r):
        return sorted(
            (row.key, row.pending, row.queue_depth, row.oldest_pending_at)
            for row in [r.total, *r.rows]
        )

    assert len(report.rows) == TOOLS
    assert queue(report) == queue(exact)


@pytest.mark.skipif("connection.vendor != 'sqlite'", reason="SQLite's variable limit")
def test_the_oldest_pending_reads_fit_sqlites_999_variables(alice):
    """Each key's subquery takes three variables (status, day, key): 400 tools need 1200, past
    the 999 an SQLite build may allow (what Django assumes: features.max_query_params)."""
    import sqlite3

    from approvals.rollup_pending import pending_cells
    from console.metrics.rollup import queue_from_cells

    run = RunFactory(requested_by=alice)
    for index in range(400):
        ApprovalFactory(run=run, tool=f"tool_{index:05d}", interrupt_id=f"i{index}")
    cells = pending_cells()
    connection.ensure_connection()
    limit = connection.features.max_query_params
    old = connection.connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, limit)
    try:
        queue = queue_from_cells(cells, groups=("tool", None))
    finally:
        connection.connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, old)
    assert len(queue["tool"]) == 400
    assert all(entry["oldest"] is not None for entry in queue["tool"].values())
