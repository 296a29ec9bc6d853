"""The audit log filtered by a tool and a few days reads those days' rows, not the chain after
them (at 20M rows, an old day took 4-6 s: Postgres walked the seq index back from the head)."""

from __future__ import annotations

import datetime as dt
import re

import pytest
import time_machine
from django.db import connection

from audit.models import AuditEvent
from audit.services import event_record

pytestmark = pytest.mark.django_db

DAY = "/audit/?tool=refund_order&date_from=2026-03-02&date_to=2026-03-02"


def _seed(actor) -> None:
    """Events on 1-3 March 2026, every other one with the tool."""
    for day in (1, 2, 3):
        for hour in range(12):
            when = dt.datetime(2026, 3, day, hour, tzinfo=dt.UTC)
            with time_machine.travel(when, tick=False):
                tool = "refund_order" if hour % 2 else ""
                event_record(action="approval.decided", actor=actor, tool=tool)


def _page_queries(client, url: str) -> list[str]:
    connection.force_debug_cursor = True
    try:
        response = client.get(url)
        sql = [query["sql"] for query in connection.queries if "audit_auditevent" in query["sql"]]
    finally:
        connection.force_debug_cursor = False
    assert response.status_code == 200
    return sql


def _expected(*, before: int | None = None) -> list[int]:
    start = dt.datetime(2026, 3, 2, tzinfo=dt.UTC)
    rows = AuditEvent.objects.filter(
        tool="refund_order", at__gte=start, at__lt=start + dt.timedelta(days=1)
    )
    if before is not None:
        rows = rows.filter(seq__lt=before)
    return list(rows.order_by("-seq").values_list("seq", flat=True))


@pytest.mark.parametrize("page", ["first", "older"])
def test_a_tool_and_day_page_shows_that_days_rows_newest_first(client, frank, page, settings):
    settings.TIME_ZONE = "UTC"
    _seed(frank)
    client.force_login(frank)
    before = _expected()[2] if page == "older" else None
    url = DAY + (f"&before={before}" if before else "")

    events = client.get(url).context["events"]

    assert [event.seq for event in events] == _expected(before=before)
    assert len(events) == (3 if page == "older" else 6)


def test_a_tool_and_day_page_limits_an_order_no_index_holds(client, frank):
    """ORDER BY seq DESC LIMIT 51 over an old day's filter is the 20M-row walk: Postgres plans
    it as the seq index read backwards from the head. The page's limit must sit on an order
    only a sort of the range's own rows gives (the plan test below needs Postgres)."""
    _seed(frank)
    client.force_login(frank)
    (sql,) = [q for q in _page_queries(client, DAY) if "LIMIT" in q]

    assert re.search(r'ORDER BY \(\S+"seq" \+ 0\) DESC LIMIT', sql), sql


@pytest.mark.skipif(connection.vendor != "postgresql", reason="Postgres's plan")
def test_a_tool_and_day_page_takes_the_days_seqs_from_the_tool_at_seq_index(client, frank):
    """With index scans preferred (a small table would be read whole), the page's query reads
    the (tool, at, seq) index, not the seq index backwards."""
    _seed(frank)
    client.force_login(frank)
    (sql,) = [q for q in _page_queries(client, DAY) if "LIMIT" in q]

    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())

    assert "audit_tool_at_seq" in plan, plan
    assert "Backward" not in plan, plan


def test_the_migration_leaves_the_tool_at_seq_index():
    names = connection.introspection.get_constraints(connection.cursor(), "audit_auditevent")

    assert names["audit_tool_at_seq"]["columns"] == ["tool", "at", "seq"]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="CREATE INDEX CONCURRENTLY")
@pytest.mark.django_db(transaction=True)
def test_the_migration_rebuilds_an_index_a_failed_concurrent_build_left_invalid(frank):
    """A CONCURRENTLY build that fails leaves an INVALID index of its name: IF NOT EXISTS alone
    would keep it, and the migration would be recorded as done with no usable index."""
    import importlib

    from django.apps import apps
    from django.db import DatabaseError

    migration = importlib.import_module("audit.migrations.0007_tool_at_seq_index")
    for _ in range(2):
        event_record(action="approval.decided", actor=frank, tool="refund_order")
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX audit_tool_at_seq")
        with pytest.raises(DatabaseError):  # duplicates: the build fails, the index stays
            cursor.execute(
                "CREATE UNIQUE INDEX CONCURRENTLY audit_tool_at_seq ON audit_auditevent (tool)"
            )
    valid = (
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE c.relname = 'audit_tool_at_seq'"
    )
    with connection.cursor() as cursor:
        cursor.execute(valid)
        assert cursor.fetchone() == (False,)
    with connection.schema_editor(atomic=False) as editor:
        migration.forwards(apps, editor)
    with connection.cursor() as cursor:
        cursor.execute(valid)
        assert cursor.fetchone() == (True,)
    names = connection.introspection.get_constraints(connection.cursor(), "audit_auditevent")
    assert names["audit_tool_at_seq"]["columns"] == ["tool", "at", "seq"]
