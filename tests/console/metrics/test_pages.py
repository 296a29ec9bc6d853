"""The metrics page, its CSV export and GET /api/metrics/: who may see them, what they say."""

from __future__ import annotations

import csv
import io

import pytest
import time_machine
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from tests.support.factories import ApprovalFactory, RunFactory
from tests.support.metrics import DAY, NOW
from tests.support.people import client_for as page_client
from tests.support.people import person
from tests.support.people import rest_client_for as api_client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def csv_rows(response) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_api_gives_the_numbers_of_the_chosen_grouping(metrics_data, erin):
    response = api_client(erin).get("/api/metrics/", {"window": 30, "group": "reviewer"})

    assert response.status_code == 200
    body = response.json()
    assert (body["window_days"], body["group"]) == (30, "reviewer")
    assert body["total"]["requests"] == 12
    assert body["total"]["time_to_decision_seconds"] == {"p50": 8.0, "p90": 600.0, "p95": 600.0}
    bob = next(row for row in body["rows"] if row["key"] == "bob")
    assert bob["outcomes"]["approve"] == 5 and bob["rates"]["approve"] == 1.0
    assert bob["fatigue"] is True
    assert body["fatigue"][0] == {
        "dimension": "reviewer",
        "key": "bob",
        "approve_rate": 1.0,
        "median_seconds": 5.0,
        "decisions": 5,
        "reason": "approves almost everything, fast",
        "catch_rate": None,  # bob decided no canary
    }
    assert bob["canaries"] is None
    assert body["runs_by_status"]["dead"] == 1
    assert body["fatigue_thresholds"] == {
        "approval_rate": 0.98,
        "median_seconds": 10.0,
        "canary_catch_rate": 0.8,
        "canary_min_seen": 3,
    }
    assert len(body["decisions_per_day"]) == 31


def test_api_defaults_to_thirty_days_by_tier(metrics_data, erin):
    body = api_client(erin).get("/api/metrics/").json()

    assert (body["window_days"], body["group"]) == (30, "tier")
    assert [row["key"] for row in body["rows"]] == ["write", "critical"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"window": "0"}, "window"),
        ({"window": "366"}, "window"),
        ({"window": "month"}, "window"),
        ({"group": "colour"}, "group"),
    ],
)
def test_bad_parameters_get_400_naming_the_field(erin, params, field):
    api = api_client(erin).get("/api/metrics/", params)
    page = page_client(erin).get("/metrics/", params)
    export = page_client(erin).get("/metrics/export.csv", params)

    assert api.status_code == 400
    assert list(api.json()["errors"]) == [field]
    assert field in api.json()["detail"]
    assert page.status_code == 400
    assert f"{field}: " in page.content.decode()
    assert export.status_code == 400
    assert field in export.content.decode()


def test_page_and_api_agree(metrics_data, erin):
    for group in ("tier", "tool", "agent", "reviewer"):
        body = api_client(erin).get("/api/metrics/", {"group": group}).json()
        page = page_client(erin).get("/metrics/", {"group": group})

        assert page.status_code == 200
        report = page.context["report"]
        assert report.total.requests == body["total"]["requests"]
        page_rows = {
            row.key: (row.requests, row.outcomes, row.percentiles[50], row.queue_depth)
            for row in report.rows
        }
        api_rows = {
            row["key"]: (
                row["requests"],
                row["outcomes"],
                row["time_to_decision_seconds"]["p50"],
                row["queue_depth"],
            )
            for row in body["rows"]
        }
        assert page_rows == api_rows, group


def test_page_shows_the_table_the_charts_and_the_fatigue_signal(metrics_data, erin):
    html = page_client(erin).get("/metrics/", {"group": "tool"}).content.decode()

    assert 'data-metric="requests">12<' in html
    assert 'data-metric="p50">8 s<' in html
    assert 'data-metric="dead-runs">1<' in html
    assert 'data-fatigue="reviewer:bob"' in html
    assert 'data-fatigue="tool:create_incident_ticket"' in html
    assert '<tr data-key="create_incident_ticket" class="fatigued">' in html
    for chart in ("chart-decisions", "chart-time", "chart-queue"):
        assert f'<svg class="chart" id="{chart}" role="img"' in html
    assert html.count('class="bar s-approve"') == 3  # three days with approvals
    assert 'href="/metrics/export.csv?window=30&amp;group=tool"' in html


def test_csv_export_is_the_table_with_a_total_line(metrics_data, erin):
    response = page_client(erin).get("/metrics/export.csv", {"window": 30, "group": "tier"})

    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert 'filename="metrics-tier-30d.csv"' in response["Content-Disposition"]
    rows = csv_rows(response)
    assert [(r["group"], r["key"]) for r in rows] == [
        ("tier", "write"),
        ("tier", "critical"),
        ("(all)", ""),
    ]
    write = rows[0]
    assert (write["requests"], write["approve"], write["approve_rate"]) == ("7", "5", "0.7143")
    assert (write["p50_seconds"], write["p90_seconds"], write["p95_seconds"]) == (
        "6.000",
        "300.000",
        "300.000",
    )
    assert (rows[1]["queue_depth"], rows[1]["oldest_pending_age_seconds"]) == ("2", "3456000")
    assert (rows[2]["requests"], rows[2]["closed"], rows[2]["expired"]) == ("12", "11", "2")


def test_people_outside_managers_get_403_and_anonymous_people_log_in_first(dave, bob, erin, db):
    assert page_client(dave).get("/metrics/").status_code == 403
    assert page_client(bob).get("/metrics/export.csv").status_code == 403
    assert api_client(dave).get("/api/metrics/").status_code == 403
    assert APIClient().get("/api/metrics/").status_code in (401, 403)
    anonymous = Client().get("/metrics/")
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")
    admin = person("root", superuser=True)
    assert page_client(admin).get("/metrics/").status_code == 200
    assert page_client(erin).get("/metrics/").status_code == 200


def test_metrics_link_is_in_the_nav_for_managers_only(erin, dave):
    link = '<a href="/metrics/"'

    assert link in page_client(erin).get("/metrics/").content.decode()
    assert link not in page_client(dave).get("/runs/").content.decode()


def test_the_page_takes_the_same_number_of_queries_whatever_the_data(metrics_data, erin, carol):
    client = page_client(erin)

    def queries(group: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/metrics/", {"group": group}).status_code == 200
        return len(captured)

    before = {group: queries(group) for group in ("tier", "reviewer")}
    run = metrics_data.runs["incident"]
    for index in range(30):
        ApprovalFactory(
            run=run,
            tier=f"tier-{index % 5}",
            tool=f"tool_{index}",
            created_at=NOW - (index + 1) * DAY / 2,
            status=ApprovalRequest.Status.REJECTED,
            decided_by=carol,
            decided_after=DAY / 100,
        )

    assert {group: queries(group) for group in ("tier", "reviewer")} == before


def test_csv_cells_that_look_like_formulas_are_quoted(alice, erin, db):
    run = RunFactory(requested_by=alice, agent="refund_agent", status="waiting", created_at=NOW)
    ApprovalFactory(
        run=run,
        tier="write",
        tool="=HYPERLINK(1)",
        created_at=NOW - DAY,
        status=ApprovalRequest.Status.PENDING,
    )
    rows = csv_rows(page_client(erin).get("/metrics/export.csv", {"group": "tool"}))

    assert rows[0]["key"] == "'=HYPERLINK(1)"
