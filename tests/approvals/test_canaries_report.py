"""Each reviewer's canary catch rate: in the metrics (reviewer rows, fatigue flags) and on
compliance's canary report (page, API, a real browser)."""

from __future__ import annotations

import os

import pytest

from approvals.models import ApprovalRequest
from console.metrics import metrics_report
from tests.approvals.canary_support import plan_for, plant
from tests.support.approvals import decide
from tests.support.browser import collected_static, live_server_tab  # noqa: F401
from tests.support.people import client_for, rest_client_for

TEMPLATES = ["refund_doubled_amount", "refund_unknown_account"]


def _decided(plan, user, decisions: list[str]) -> None:
    for number, decision in enumerate(decisions):
        canary = plant(TEMPLATES[number % 2], plan=plan)
        message = {"message": "no"} if decision in ("reject", "respond") else {}
        decide(ApprovalRequest.objects.get(pk=canary.approval_id), user, decision, **message)


@pytest.fixture
def history(demo_policy, bob, carol):
    """bob: 1 caught, 3 missed (25 %); carol: 3 caught (100 %); one canary still open."""
    plan = plan_for("write", per_day=6)
    _decided(plan, bob, ["reject", "approve", "approve", "approve"])
    _decided(plan, carol, ["reject", "respond", "reject"])
    plant(plan=plan)
    return plan


@pytest.mark.django_db
def test_the_reviewer_rows_carry_the_catch_rate(history):
    report = metrics_report(window_days=30, group="reviewer")
    rows = {row.key: row for row in report.rows}
    assert (rows["bob"].canaries.caught, rows["bob"].canaries.missed) == (1, 3)
    assert rows["bob"].canaries.rate == 0.25
    assert rows["carol"].canaries.rate == 1.0
    # Canaries are not requests: the table counts none of them.
    assert report.total.requests == 0


@pytest.mark.django_db
def test_a_reviewer_missing_canaries_is_flagged_with_the_reason(history):
    flags = {f.key: f for f in metrics_report(window_days=30, group="reviewer").fatigue}
    assert set(flags) == {"bob"}
    assert flags["bob"].catch_rate == 0.25
    assert "caught 1 of 4 canaries" in flags["bob"].reason


@pytest.mark.django_db
def test_the_catch_rate_threshold_and_minimum_are_settings(history, settings):
    settings.AUTONOMY_CANARY_FATIGUE_CATCH_RATE = 0.2
    assert metrics_report(window_days=30, group="reviewer").fatigue == []
    settings.AUTONOMY_CANARY_FATIGUE_CATCH_RATE = 0.8
    settings.AUTONOMY_CANARY_MIN_SEEN = 5  # bob decided four
    assert metrics_report(window_days=30, group="reviewer").fatigue == []


@pytest.mark.django_db
def test_the_metrics_api_gives_each_reviewers_canaries(history, erin):
    body = rest_client_for(erin).get("/api/metrics/", {"group": "reviewer"}).json()
    bob = next(row for row in body["rows"] if row["key"] == "bob")
    assert bob["canaries"] == {"seen": 4, "caught": 1, "missed": 3, "catch_rate": 0.25}
    assert [(f["key"], f["catch_rate"]) for f in body["fatigue"]] == [("bob", 0.25)]


@pytest.mark.django_db
def test_the_metrics_page_shows_the_catch_rate_column(history, erin):
    page = client_for(erin).get("/metrics/", {"group": "reviewer"}).content.decode()
    assert "Canary catch rate" in page
    assert "1 of 4" in page


@pytest.mark.django_db
def test_the_report_api_gives_compliance_each_reviewer_and_the_plans(history, frank):
    body = rest_client_for(frank).get("/api/canaries/report/").json()
    rates = {r["reviewer"]: (r["seen"], r["caught"], r["missed"]) for r in body["reviewers"]}
    assert rates == {"bob": (4, 1, 3), "carol": (3, 3, 0)}
    assert body["reviewers"][0]["reviewer"] == "bob"  # lowest catch rate first
    assert body["reviewers"][0]["last_miss"] is not None
    assert body["open"] == 1 and len(body["recent"]) == 8
    assert body["plans"] == [
        {"id": history.pk, "tier": "write", "per_day": 6, "templates": [], "problem": ""}
    ]


@pytest.mark.django_db
def test_reviewers_may_not_read_the_report(history, bob):
    assert rest_client_for(bob).get("/api/canaries/report/").status_code == 403
    assert client_for(bob).get("/canaries/").status_code == 403
    assert "/canaries/" not in client_for(bob).get("/").content.decode()


@pytest.mark.django_db
def test_compliance_sees_the_report_and_its_nav_link(history, frank):
    page = client_for(frank).get("/canaries/").content.decode()
    assert 'href="/canaries/"' in page
    assert 'data-reviewer="bob"' in page and "25.0 %" in page


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_compliance_reads_the_canary_report_in_a_browser(
    collected_static,  # noqa: F811
    live_server,
    history,
    frank,
):
    with live_server_tab(live_server.url, username=frank.username) as tab:
        tab.get_by_role("link", name="Canaries").click()
        tab.wait_for_url(f"{live_server.url}/canaries/")
        rows = tab.locator("#canary-reviewers tbody tr")
        assert rows.count() == 2
        assert "25.0 %" in rows.nth(0).inner_text()
        assert tab.locator("#canary-recent tbody tr").count() == 8
        assert "6 a day" in tab.locator("#canary-plans").inner_text()
        if os.environ.get("SCREENSHOTS"):
            from tests.support.browser import SCREENSHOTS

            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            tab.screenshot(
                path=str(SCREENSHOTS / "autonomy_canaries.png"),
                full_page=True,
                animations="disabled",
            )
