"""The console pages read a fixed number of queries, however many rows the tables hold (the
speed at 10M rows is bench/pages.py's; the count is deterministic, so it is asserted here)."""

from __future__ import annotations

import pytest
from django.db import connection

from audit.services import event_record, events_seed
from tests.support.factories import ApprovalFactory, RunFactory

pytestmark = pytest.mark.django_db

# Sessions, the user, permissions and the page's own reads: a budget a per-row query breaks.
MAX_QUERIES = 15


def _grow(alice, bob, *, runs: int) -> None:
    for n in range(runs):
        run = RunFactory(requested_by=alice, agent="refund_agent" if n % 2 else "deploy_bot")
        ApprovalFactory(run=run)
        ApprovalFactory(run=run, tool="rollback_deploy", status="approved", decided_by=bob)
        event_record(action="approval.decided", actor=bob, approval_id=n, tool="refund_order")
    events_seed(count=runs * 5)


def _queries(client, url: str) -> int:
    """The queries of one request. Not CaptureQueriesContext: request_started empties the
    query log, so a context opened before the request miscounts it."""
    connection.force_debug_cursor = True
    try:
        response = client.get(url)
        count = len(connection.queries)
    finally:
        connection.force_debug_cursor = False
    assert response.status_code == 200, (url, response.status_code)
    assert count > 0
    return count


PAGES = [
    ("bob", "/"),
    ("bob", "/?scope=all"),
    ("bob", "/runs/"),
    ("bob", "/runs/?status=waiting"),
    ("frank", "/audit/"),
    ("frank", "/audit/?before=20"),
    ("frank", "/audit/?action=approval.decided"),
    ("frank", "/audit/?actor=bob&tool=refund_order"),
]


@pytest.mark.parametrize(("who", "url"), PAGES)
def test_a_page_reads_as_many_queries_at_30_rows_as_at_3(
    client, request, alice, bob, frank, who, url
):
    client.force_login(request.getfixturevalue(who))
    _grow(alice, bob, runs=3)
    few = _queries(client, url)

    _grow(alice, bob, runs=27)
    many = _queries(client, url)

    assert many == few
    assert many <= MAX_QUERIES


def test_the_approval_detail_reads_as_many_queries_with_more_approvals(client, alice, bob):
    client.force_login(bob)
    _grow(alice, bob, runs=3)
    approval = ApprovalFactory(run=RunFactory(requested_by=alice))
    few = _queries(client, f"/approvals/{approval.pk}/")

    _grow(alice, bob, runs=27)
    many = _queries(client, f"/approvals/{approval.pk}/")

    assert many == few
    assert many <= MAX_QUERIES
