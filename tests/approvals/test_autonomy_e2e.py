"""Review after the fact in a real browser (Debian chromium via Playwright, pytest-django's
live server): bob finds two actions that ran without waiting, marks one fine, undoes the other
and watches its card turn from undoing to undone.

The agents' compensation task is not this part's: the undo's enqueue is replaced, inside this
test only, by a stub that records the action; the test then finishes the undo as the task
would (a conditional update from undoing), and the page's poll shows it. With SCREENSHOTS=1 it
saves docs/screenshots/autonomy_after_queue.png and autonomy_after_detail.png.
"""

from __future__ import annotations

import datetime as dt
import os

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from approvals.autonomy import is_sampled
from approvals.autonomy_models import AutonomousAction, AutonomyRule
from approvals.contract import AUTONOMY_UNDO_TASK
from approvals.services import autonomy_review
from tests.support.autonomy import AutonomousActionFactory, AutonomyRuleFactory
from tests.support.browser import SCREENSHOTS, live_server_tab
from tests.support.factories import RunFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
Review = AutonomousAction.Review


def _screenshot(tab, name: str) -> None:
    if os.environ.get("SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(SCREENSHOTS / name), full_page=True, animations="disabled")


def _sampled_suffixes(run, *, percent: int, count: int) -> list[str]:
    """Call ids of ``run`` whose keys' draws fall in a ``percent`` sample (as the gate's do)."""
    found = (f"call-{n}" for n in range(10_000))
    keys = (s for s in found if is_sampled(key=f"{run.thread_id}:{s}", percent=percent))
    return [next(keys) for _ in range(count)]


def test_bob_marks_one_action_fine_and_undoes_another_in_a_browser(
    live_server, demo_policy, alice, bob, monkeypatch
):
    enqueued: list[tuple[str, int]] = []
    monkeypatch.setattr(
        autonomy_review, "async_task", lambda name, pk, **_: enqueued.append((name, pk))
    )
    now = timezone.now()
    run = RunFactory(requested_by=alice, status="running", input={"order_id": "A-1001"})
    rule = AutonomyRuleFactory(mode=AutonomyRule.Mode.SAMPLED, sample_percent=10)
    sampled = {"rule": rule, "mode": AutonomyRule.Mode.SAMPLED, "sample_percent": 10}
    first, second = _sampled_suffixes(run, percent=10, count=2)
    fine = AutonomousActionFactory(
        run=run, suffix=first, created_at=now - dt.timedelta(hours=2), **sampled
    )
    undo = AutonomousActionFactory(
        run=run,
        suffix=second,
        args={"order_id": "A-1002", "amount": 80, "reason": "late", "notify": True},
        created_at=now - dt.timedelta(minutes=30),
        **sampled,
    )
    AutonomousActionFactory(run=run, tool="create_ticket", review=Review.FINE, reviewed_by=bob)

    with live_server_tab(live_server.url, username="bob") as tab:
        tab.get_by_role("link", name="After the fact").click()
        expect(tab.get_by_role("heading", name="Review after the fact")).to_be_visible()
        rows = tab.locator("#after-table tbody tr[data-row]")
        expect(rows).to_have_count(2)
        expect(tab.locator("[data-waiting]")).to_have_text("2")
        expect(rows.first).to_have_attribute("data-key", f"action-{fine.pk}")
        _screenshot(tab, "autonomy_after_queue.png")

        # The first: why it ran, then "Fine"; back to the queue, one left.
        rows.first.locator("a.row-link").click()
        why = tab.locator("#why-it-ran")
        expect(why).to_contain_text(f"This call's draw is {fine.draw} < 10% × 100 = 1000")
        tab.get_by_role("button", name="Fine", exact=True).click()
        expect(tab.locator(".flash")).to_contain_text(f"marked refund_payment (action #{fine.pk})")
        expect(rows).to_have_count(1)
        expect(tab.locator("[data-waiting]")).to_have_text("1")

        # The second: "Undo…" says what the compensation does, and asks to confirm.
        rows.first.locator("a.row-link").click()
        tab.locator("#undo-group summary").click()
        says = tab.locator("[data-undo-says]")
        expect(says).to_contain_text("The undo runs the tool's compensating action exactly once.")
        expect(says).to_contain_text("Refunds 80 USD on order A-1002")
        _screenshot(tab, "autonomy_after_detail.png")
        tab.fill("#undo-note", "wrong order: the parcel was not late")
        tab.get_by_role("button", name="Confirm undo").click()
        card = tab.locator("#action-review")
        expect(card).to_have_attribute("data-review", "undoing")
        assert enqueued == [(AUTONOMY_UNDO_TASK, undo.pk)]

        # The compensation reports back (as the agents' task does): the card follows by itself.
        AutonomousAction.objects.filter(pk=undo.pk, review=Review.UNDOING).update(
            review=Review.UNDONE
        )
        expect(card).to_have_attribute("data-review", "undone", timeout=10_000)
        expect(card).to_contain_text("Undone: the compensating action ran once")

    assert AutonomousAction.objects.get(pk=fine.pk).review == Review.FINE
