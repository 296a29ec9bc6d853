"""The ops page in a real browser (Debian chromium via Playwright): an admin sees the checkpoint
tables shrink after a prune pass; also saves docs/screenshots/ops.png."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import Page, expect

from agents.models import RetentionPolicy
from agents.runtime import retention
from tests.support.browser import live_server_tab
from tests.support.retention import finished_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SCREENSHOT = Path(settings.BASE_DIR) / "docs" / "screenshots" / "ops.png"


@pytest.fixture
def admin_tab(live_server, admin) -> Iterator[Page]:
    with live_server_tab(live_server.url, username="admin") as tab:
        yield tab


def test_an_admin_sees_the_checkpoint_tables_and_the_pass_that_pruned_a_finished_run(
    note_agent, alice, bob, admin_tab: Page
):
    finished_run(alice, bob, topic="disk")
    finished_run(alice, bob, topic="memory")
    RetentionPolicy.objects.create(agent="note_agent", keep_days=7, action="final")
    result = retention.checkpoints_prune_pass()
    assert result.rows.checkpoints > 0

    admin_tab.get_by_role("link", name="Ops").click()

    expect(admin_tab.get_by_role("heading", level=1)).to_contain_text("Operations")
    expect(admin_tab.locator("[data-checkpoint-table]").first).to_be_visible()
    expect(admin_tab.locator('[data-policy="note_agent"]')).to_contain_text("7 days")
    expect(admin_tab.locator("[data-pruned-total]")).to_contain_text("2 to their final checkpoint")
    expect(admin_tab.locator('[data-table="retention-passes"] tbody tr')).to_have_count(1)
    admin_tab.screenshot(path=str(SCREENSHOT), full_page=True, animations="disabled")
