"""Deciding related approvals together in a real browser: from the queue's "Decide together"
to a batch, some items selected, one of them changed meanwhile (409 for it, the others
approved). With SCREENSHOTS=1 the batch page is saved as docs/screenshots/autonomy_batch.png."""

from __future__ import annotations

import os

import pytest
from django.contrib.auth.models import Group
from django.db import transaction
from playwright.sync_api import expect

from approvals.models import ApprovalRequest
from approvals.services import policy_seed_demo
from approvals.services.rounds import round_start
from tests.support.factories import ApprovalFactory, RunFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_bob_approves_a_selection_of_a_batch_and_sees_the_stale_item_refused(
    log_in, alice, bob, carol
):
    policy_seed_demo()
    bob.groups.add(Group.objects.get(name="approvers-write"))
    first, stale, third, left_out = (
        ApprovalFactory(
            run=RunFactory(requested_by=alice),
            args={"order_id": f"A-70{n}", "amount": 40 + n * 5},
            rationale=f"Incident 4411: order A-70{n} was charged twice.",
        )
        for n in range(1, 5)
    )

    as_bob = log_in(bob)
    page = as_bob.page
    page.goto("/")
    page.get_by_role("link", name="Decide together").click()
    page.locator('tr[data-batch="refund_agent/refund_order/write"] a').click()
    expect(page.locator("#batch-items tbody tr")).to_have_count(4)
    third_row = page.locator(f'tr[data-item="{third.pk}"]')
    expect(third_row.locator(".batch-diff").first).to_contain_text("amount: 45 55")
    expect(page.locator("#batch-first-args")).to_contain_text("A-701")

    # bob leaves the fourth out; meanwhile the second changes (a new round for other args).
    page.locator(f"#item-{left_out.pk}").uncheck()
    with transaction.atomic():
        locked = ApprovalRequest.objects.select_for_update().get(pk=stale.pk)
        round_start(approval=locked, args={"order_id": "A-702", "amount": 480}, by=carol)
    page.get_by_label("Message, sent to each agent (optional)").fill("Duplicate charges, refunded.")
    page.get_by_role("button", name="Approve selected").click()

    results = page.locator("#batch-results")
    expect(results.locator(f'tr[data-result="{first.pk}"]')).to_contain_text("Approved")
    expect(results.locator(f'tr[data-result="{third.pk}"]')).to_contain_text("Approved")
    expect(results.locator(f'tr[data-result="{stale.pk}"]')).to_contain_text(
        "Stale: changed since you loaded it, open it alone"
    )
    expect(results.locator(f'tr[data-result="{stale.pk}"]')).to_contain_text("409")
    expect(results.locator("tbody tr")).to_have_count(3)
    # What is left waits below: the stale one (to open alone) and the one left out.
    expect(page.locator("#batch-items tbody tr")).to_have_count(2)
    if os.environ.get("SCREENSHOTS") == "1":
        as_bob.screenshot("autonomy_batch.png")

    statuses = dict(ApprovalRequest.objects.values_list("pk", "status"))
    assert [statuses[a.pk] for a in (first, stale, third, left_out)] == [
        "approved",
        "pending",
        "approved",
        "pending",
    ]
    assert not as_bob.errors
