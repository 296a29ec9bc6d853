"""A claim seen by a second reviewer, and an assignment found by its assignee, in real browsers."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from playwright.sync_api import expect

from approvals.models import ApprovalClaim
from approvals.services import policy_seed_demo
from tests.support.factories import ApprovalFactory, RunFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_carol_sees_bobs_claim_and_finds_the_approval_an_admin_assigned_her(
    log_in, alice, bob, carol, admin
):
    policy_seed_demo()
    groups = {g.name: g for g in Group.objects.all()}
    bob.groups.add(groups["approvers-write"])
    carol.groups.add(groups["approvers-write"], groups["approvers-critical"])
    run = RunFactory(requested_by=alice)
    # Critical: bob (approvers-write) and carol (approvers-critical) may both vote on it.
    claimed = ApprovalFactory(run=run, tier="critical", args={"order_id": "A-7001", "amount": 900})
    assigned = ApprovalFactory(run=run, tier="critical", args={"order_id": "A-7002", "amount": 800})

    # bob claims the first one from its page (htmx swaps the card).
    as_bob = log_in(bob)
    as_bob.page.goto(f"/approvals/{claimed.pk}/")
    as_bob.page.get_by_role("button", name="Claim: I am looking at this").click()
    expect(as_bob.page.locator("#approval-claim")).to_contain_text("You are looking at this since")
    since = timezone.localtime(ApprovalClaim.objects.get(approval=claimed).since).strftime("%H:%M")

    # carol opens it in her own browser: warned, and still offered every decision.
    as_carol = log_in(carol)
    carol_page = as_carol.page
    carol_page.goto(f"/approvals/{claimed.pk}/")
    expect(carol_page.locator("#approval-claim .claim-notice")).to_have_text(
        f"bob is looking at this since {since}; your decision will still count."
    )
    expect(carol_page.locator("#decide-approve button")).to_be_visible()
    as_carol.screenshot("approval-claim.png")

    # Her queue row says it too.
    carol_page.goto("/")
    row = carol_page.locator(f'#queue-table tr[data-key="approval-{claimed.pk}"]')
    expect(row.locator(".claim-badge")).to_have_text(f"bob is looking at this since {since}")

    # An admin assigns the second one to carol from its page.
    as_admin = log_in(admin)
    as_admin.page.goto(f"/approvals/{assigned.pk}/")
    as_admin.page.select_option("#assign-user", "carol")
    as_admin.page.get_by_role("button", name="Assign", exact=True).click()
    expect(as_admin.page.locator("#approval-claim .claim-notice")).to_contain_text(
        "assigned to carol by admin at"
    )

    # carol's "Assigned to me" lists it, and only it.
    carol_page.select_option("#id_scope", "assigned")
    expect(carol_page.locator("#queue-heading")).to_have_text("Assigned to you")
    rows = carol_page.locator("#queue-table tbody tr[data-row]")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-key", f"approval-{assigned.pk}")
    expect(rows.first.locator(".claim-badge")).to_contain_text("assigned to carol by admin at")
