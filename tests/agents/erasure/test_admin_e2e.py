"""The admin's erasure in a real browser (Debian chromium via Playwright): compliance selects a
run, gives a reason, and reads what was erased."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from approvals.models import AgentRun
from tests.support.browser import live_server_tab

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("queued"),
]


def test_compliance_erases_a_run_from_the_admin_in_a_browser(live_server, driven, frank):
    frank.is_staff = True
    frank.save()
    run = driven.run
    with live_server_tab(live_server.url, username="frank") as tab:
        # The admin's pages link no icon, so the browser asks for /favicon.ico (a 404).
        tab.route("**/favicon.ico", lambda route: route.fulfill(status=204))
        tab.goto("/admin/approvals/agentrun/")
        tab.locator(f'input[name="_selected_action"][value="{run.pk}"]').check()
        tab.select_option('select[name="action"]', "erase_personal_data")
        tab.locator('.actions button[name="index"]').first.click()
        expect(tab.get_by_role("heading", level=1)).to_contain_text("Erase personal data")
        tab.fill("#id_reason", "art. 17 request, ticket 88")
        tab.get_by_role("button", name="Erase personal data").click()
        expect(tab.locator('[data-erasure="done"]')).to_contain_text("Erased the personal data")
    assert AgentRun.objects.get(pk=run.pk).erased_at is not None
