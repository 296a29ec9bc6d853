"""An admin reads the autonomy advice in a real browser and applies a promotion (with
SCREENSHOTS=1, the page is saved as docs/screenshots/autonomy_advice.png)."""

from __future__ import annotations

import os

import pytest

from approvals import autonomy
from approvals.autonomy_models import AutonomyRule
from approvals.models import RiskTier
from tests.support.autonomy_advice import autonomous_actions, closed_approvals, shadow_verdicts
from tests.support.browser import SCREENSHOTS, collected_static, live_server_tab  # noqa: F401
from tests.support.factories import RunFactory


@pytest.fixture
def compensated():
    before = autonomy._compensation_provider
    autonomy.compensation_provider_set(lambda tool: tool in {"refund_order", "send_email"})
    yield
    autonomy.compensation_provider_set(before)


def _seed(bob) -> None:
    write = RiskTier.objects.create(name="write", level=1)
    RiskTier.objects.create(name="critical", level=2)
    # refund_order asks: 58 of 60 approved, 1 edited, 1 rejected (wrong amount): promote.
    closed_approvals(
        by=bob,
        tool="refund_order",
        approve=58,
        edit=1,
        reject=1,
        reasons={"wrong_amount": 1},
        seconds=40,
    )
    # send_email runs sampled: 12 of 50 rejected, 3 of 40 reviewed actions undone: demote.
    AutonomyRule.objects.create(tool="send_email", mode="sampled", sample_percent=10)
    closed_approvals(
        by=bob,
        tool="send_email",
        approve=38,
        reject=12,
        reasons={"not_needed": 9, "unsafe": 1},
        seconds=15,
    )
    autonomous_actions(run=RunFactory(requested_by=bob), tool="send_email", fine=37, undone=3)
    # close_ticket shadows: 18 of 20 verdicts agreed; too little volume to promote yet.
    AutonomyRule.objects.create(tool="close_ticket", mode="shadow")
    shadowed = closed_approvals(by=bob, tool="close_ticket", approve=18, respond=2, seconds=300)
    shadow_verdicts(approvals=shadowed, agreed=18)
    closed_approvals(
        by=bob, tool="rollback_deploy", tier="critical", approve=6, reject=2, expired=1, seconds=900
    )
    assert write.pk


@pytest.mark.e2e
@pytest.mark.usefixtures("collected_static")
@pytest.mark.django_db(transaction=True)
def test_an_admin_reads_the_advice_and_applies_a_promotion(live_server, admin, bob, compensated):
    _seed(bob)

    with live_server_tab(live_server.url, username=admin.username) as tab:
        tab.get_by_role("link", name="Autonomy").click()
        tab.wait_for_url("**/autonomy/")
        promote = tab.locator('tr[data-key="tool:refund_order"]')
        assert promote.get_attribute("data-advice") == "promote"
        advice = tab.locator('tr[data-advice-for="tool:refund_order"]')
        assert "approve rate 96.7% (58 of 60) ≥ 95.0%" in advice.inner_text()
        demote = tab.locator('tr[data-key="tool:send_email"]')
        assert demote.get_attribute("data-advice") == "demote"
        assert "7.5 %" in demote.locator('[data-col="undo"]').inner_text()
        shadow = tab.locator('tr[data-key="tool:close_ticket"]')
        assert "90.0 %" in shadow.locator('[data-col="shadow"]').inner_text()
        if os.environ.get("SCREENSHOTS") == "1":
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            tab.screenshot(path=str(SCREENSHOTS / "autonomy_advice.png"), full_page=True)

        advice.get_by_role("button", name="Apply: sampled").click()
        tab.wait_for_url("**/autonomy/?scope=tool*")
        assert "The tool refund_order is now in Sampled mode." in tab.inner_text("main")
        row = tab.locator('tr[data-key="tool:refund_order"]')
        assert row.locator('[data-col="mode"]').inner_text().startswith("sampled")

    assert AutonomyRule.objects.get(tool="refund_order").evidence["figures"]["volume"] == 60
