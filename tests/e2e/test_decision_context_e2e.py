"""The reviewer's decision in a real browser: what happens if denied and if nobody decides, and
a policy changed while the approval waited (a banner, one more confirmation, then the run goes
on)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from approvals.models import RiskTier
from approvals.services import policy_change_record, policy_seed_demo
from audit.models import AuditEvent
from tests.support.runs import (
    is_completed,
    is_waiting_for_a_person,
    pending_approvals,
    run_start,
    run_wait,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

REFUND = {
    "order_id": "A-1001",
    "amount": "49.90",
    "reason": "arrived damaged",
    "sku": "MUG-BLUE",
    "quantity": 1,
    "customer_email": "customer@example.com",
}


def test_bob_sees_what_happens_if_denied_or_undecided_and_confirms_a_policy_change(
    log_in, api_client_for, alice, bob, admin
):
    policy_seed_demo()  # tier write: reminder 5 min before expiry, escalation after 3 min
    bob.groups.add(Group.objects.get(name="approvers-write"))
    alice_api = api_client_for(alice)
    run = run_start(alice_api, agent="refund_agent", input=REFUND)
    waiting = run_wait(
        alice_api, run["id"], until=is_waiting_for_a_person, what="an approval", timeout=60
    )
    [approval] = pending_approvals(waiting)

    bob_browser = log_in(bob)
    page = bob_browser.page
    page.goto(f"/approvals/{approval['id']}/")
    expect(page.locator("h1 code")).to_have_text("refund_order")
    # If denied: in "Why, and what it touches", and beside the reject button.
    expect(page.locator("dd[data-on-deny]")).to_contain_text("Order A-1001 is not refunded")
    page.locator("#reject-group > summary").click()
    beside_reject = page.locator("#decide-reject p[data-on-deny]")
    expect(beside_reject).to_be_visible()
    expect(beside_reject).to_contain_text("If you reject: Order A-1001 is not refunded")
    expect(beside_reject).to_contain_text("the run goes on without this action")
    # If nobody decides: the tier's default, its reminder and its escalation.
    nobody = page.locator("#if-nobody")
    expect(nobody).to_contain_text("this is rejected as system:timeout")
    expect(nobody).to_contain_text("the approvers get a reminder")
    expect(nobody).to_contain_text("members of approvers-critical may decide too")
    expect(page.locator("#changes-banner")).to_have_count(0)

    # Meanwhile an administrator changes the write tier: nobody deciding now approves.
    tier = RiskTier.objects.get(name="write")
    tier.expiry_decision = RiskTier.ExpiryDecision.APPROVE
    tier.save()
    policy_change_record(obj=tier, change="changed", actor=admin)

    page.reload()
    banner = page.locator("#changes-banner")
    expect(banner).to_contain_text("Changed while it waited")
    expect(banner).to_contain_text("tier write")
    expect(banner).to_contain_text("last by admin")
    expect(nobody).to_contain_text("this is approved as system:timeout")
    bob_browser.screenshot("approval-changed.png")

    # Approving without confirming is refused (428): the banner is highlighted, nothing decided.
    bob_browser.expect_error(r"status of 428")
    page.click("#decide-approve button[type=submit]")
    expect(page.locator("#changes-banner.refused")).to_be_visible()
    expect(page.locator(".alert-danger")).to_contain_text("confirm you have seen the changes")
    assert not AuditEvent.objects.filter(action="approval.decided").exists()

    page.locator("#decide-approve input[name=changes_seen]").check()
    page.click("#decide-approve button[type=submit]")
    page.wait_for_url(lambda url: urlsplit(url).path == "/")
    expect(page.locator(".flash")).to_contain_text(
        f"You approved refund_order (approval #{approval['id']})"
    )

    done = run_wait(alice_api, run["id"], until=is_completed, what="completion", timeout=60)
    assert done["status"] == "completed"
    decided = AuditEvent.objects.get(action="approval.decided", approval_id=approval["id"])
    assert decided.data["warned"] == ["policy"]
