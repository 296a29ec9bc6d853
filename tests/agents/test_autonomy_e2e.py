"""Autonomy's screens in a real browser (Debian chromium via Playwright): the run page shows a
call that ran without waiting and the compensation that undid it; the admin refuses post-hoc
autonomy for a tool nobody can undo. With SCREENSHOTS=1, saves docs/screenshots/autonomy_*.png."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone
from playwright.sync_api import Page, expect

from agents import tasks
from agents.runtime import advance
from agents.sandbox import systems as sandbox
from agents.services import run_start
from approvals.autonomy_models import AutonomousAction, AutonomyRule
from tests.support.browser import live_server_tab

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SCREENSHOTS = Path(settings.BASE_DIR) / "docs" / "screenshots"


def shot(tab: Page, name: str) -> None:
    if os.environ.get("SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(SCREENSHOTS / name), full_page=True, animations="disabled")


def test_the_run_page_shows_an_undone_rollback_and_its_compensation(live_server, alice):
    sandbox.deploy_record(
        service="checkout",
        version="v42",
        previous_version="v41",
        deployed_at=timezone.now() - dt.timedelta(minutes=20),
    )
    AutonomyRule.objects.create(tool="rollback_deploy", mode="post_hoc")
    incident = {"service": "checkout", "signal": "5xx above 5%", "severity": "sev1"}
    run = run_start(agent="incident_copilot", input=incident, user=alice)
    assert advance.run_advance(run_id=run.id) == "completed"
    action = AutonomousAction.objects.get()
    AutonomousAction.objects.filter(pk=action.pk).update(review="undoing")
    assert tasks.autonomous_action_undo(action.pk) == "undone"

    with live_server_tab(live_server.url, username="alice") as tab:
        tab.goto(f"/runs/{run.pk}/")
        row = tab.locator(f'[data-autonomous-action="{action.pk}"]')
        expect(tab.get_by_role("heading", name="Ran without waiting")).to_be_visible()
        expect(row).to_contain_text("rollback_deploy")
        expect(row).to_contain_text("Post Hoc")
        expect(row).to_contain_text("Undone")
        expect(row).to_contain_text(f"{action.key}:compensate")
        shot(tab, "autonomy_run.png")


def test_the_admin_refuses_post_hoc_autonomy_for_a_tool_nobody_can_undo(live_server, admin):
    with live_server_tab(live_server.url, username="admin") as tab:
        # The admin's pages link no icon, so the browser asks for /favicon.ico (a 404).
        tab.route("**/favicon.ico", lambda route: route.fulfill(status=204))
        tab.goto("/admin/approvals/autonomyrule/add/")
        tab.fill("#id_tool", "refund_order")
        tab.select_option("#id_mode", "post_hoc")
        tab.get_by_role("button", name="Save", exact=True).click()
        expect(tab.locator(".errorlist").first).to_contain_text(
            "refund_order has no compensating tool"
        )
        shot(tab, "autonomy_admin.png")
    assert not AutonomyRule.objects.exists()
