"""The metrics charts render in a real browser (Debian chromium via Playwright).

Runs against pytest-django's live server; also saves docs/screenshots/metrics.png.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Page, expect

from approvals.models import ApprovalRequest
from tests.support.browser import live_server_tab
from tests.support.factories import ApprovalFactory, RunFactory
from tests.support.metrics import metrics_data_build

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SCREENSHOT = Path(settings.BASE_DIR) / "docs" / "screenshots" / "metrics.png"
Status = ApprovalRequest.Status


def busy_month(*, now: dt.datetime, requester: User, reviewers: list[User]) -> None:
    """A few hundred decisions spread over 30 days, so the charts have something to show."""
    rng = random.Random(7)
    tools = [("refund_order", "write"), ("create_incident_ticket", "write")]
    tools.append(("rollback_deploy", "critical"))
    runs = [
        RunFactory(requested_by=requester, agent=agent, status=status, created_at=now)
        for agent, status in [("refund_agent", "completed"), ("incident_copilot", "dead")]
    ]
    choices = [Status.APPROVED] * 14 + [Status.EDITED] * 2 + [Status.REJECTED] * 3
    choices += [Status.RESPONDED, Status.EXPIRED]
    for _ in range(240):
        tool, tier = rng.choice(tools)
        created = now - dt.timedelta(days=rng.uniform(0.2, 29.5))
        status = rng.choice(choices)
        expired = status == Status.EXPIRED
        run = rng.choice(runs)
        reviewer = None if expired else rng.choice(reviewers)
        ApprovalFactory(
            run=run,
            tier=tier,
            tool=tool,
            created_at=created,
            status=status,
            decided_by=reviewer,
            decided_by_label="system:timeout" if expired else reviewer.username,
            decided_after=dt.timedelta(days=1)
            if expired
            else dt.timedelta(seconds=rng.lognormvariate(4.0, 1.6)),
            escalated=rng.random() < 0.05,
            reminded=rng.random() < 0.1,
        )
    for hours in (0.05, 0.5, 1, 3, 6, 30):
        ApprovalFactory(
            run=runs[0],
            tier="write",
            tool="refund_order",
            created_at=now - dt.timedelta(hours=hours),
        )


@pytest.fixture
def page(live_server, alice, bob, carol, admin) -> Iterator[Page]:
    now = timezone.now()
    metrics_data_build(now=now, requester=alice, bob=bob, carol=carol)
    busy_month(now=now, requester=alice, reviewers=[carol])  # bob stays a rubber stamp
    with live_server_tab(live_server.url, username="admin") as tab:
        yield tab


def test_the_three_charts_render_bars_with_labels_and_a_legend(page: Page):
    page.get_by_role("link", name="Metrics").click()
    expect(page.get_by_role("heading", name="Approval metrics")).to_be_visible()
    page.select_option("#id_group", "reviewer")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url("**/metrics/?window=30&group=reviewer")

    for chart_id, name in [
        ("chart-decisions", "Decisions per day, by outcome"),
        ("chart-time", "Time to decision"),
        ("chart-queue", "Queue age now"),
    ]:
        chart = page.locator(f"svg#{chart_id}")
        expect(chart).to_be_visible()
        expect(page.get_by_role("img", name=name)).to_be_visible()
        bars = chart.locator("rect.bar")
        assert bars.count() > 0, chart_id
        box = bars.first.bounding_box()
        assert box is not None and box["height"] > 0 and box["width"] > 0, chart_id
    legend = page.locator("svg#chart-decisions .legend text")
    expect(legend).to_have_text(["Approved", "Edited", "Rejected", "Responded", "Expired"])
    for series in ("approve", "reject", "expired"):
        assert page.locator(f"svg#chart-decisions rect.bar.s-{series}").count() > 0, series
    # Bars are coloured by the stylesheet: an approval is not painted like a rejection.
    approve = page.locator("svg#chart-decisions rect.s-approve").first.evaluate(
        "el => getComputedStyle(el).fill"
    )
    reject = page.locator("svg#chart-decisions rect.s-reject").first.evaluate(
        "el => getComputedStyle(el).fill"
    )
    assert approve != reject and "0, 0, 0" not in approve
    expect(page.locator('#metrics-table tr[data-key="bob"] .badge')).to_have_text("fatigue")

    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True, animations="disabled")
