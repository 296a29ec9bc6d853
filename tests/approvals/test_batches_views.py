"""The batch pages: the list, one batch with its per-item diff, and one decision for the
selected items with a result per item."""

from __future__ import annotations

import re

from django.db import transaction
from django.urls import reverse

from approvals.models import ApprovalRequest, ApprovalVote
from approvals.services.rounds import round_start
from tests.support.approvals import request_approval
from tests.support.people import client_for

BATCH = reverse("approvals:batch", args=["refund_agent", "refund_order", "write"])
DECIDE = reverse("approvals:batch-decide", args=["refund_agent", "refund_order", "write"])


def refunds(requester, tier: str = "write", count: int = 3) -> list[ApprovalRequest]:
    return [
        request_approval(
            requester=requester, tier=tier, args={"order_id": f"A-{n}", "amount": 100 + n}
        )
        for n in range(1, count + 1)
    ]


def checked_items(html: str) -> list[str]:
    """The value of each checkbox of the page, as the form posts it."""
    return re.findall(r'type="checkbox" name="item" value="([^"]+)"[^>]* checked', html)


def test_the_queue_offers_decide_together_only_to_a_reader_with_batches(
    demo_policy, alice, bob, dave
):
    refunds(alice)

    assert b"Decide together" in client_for(bob).get("/").content
    assert b"Decide together" not in client_for(dave).get("/").content


def test_the_batch_list_links_each_batch_with_its_count(demo_policy, alice, bob):
    refunds(alice)

    response = client_for(bob).get(reverse("approvals:batches"))

    assert response.status_code == 200
    html = response.content.decode()
    assert f'href="{BATCH}"' in html
    assert re.search(r'data-label="Approvals">3<', html)


def test_the_batch_page_shows_the_first_args_in_full_and_only_the_others_differences(
    demo_policy, alice, bob
):
    first, second, third = refunds(alice)

    response = client_for(bob).get(BATCH)

    html = response.content.decode()
    assert response.status_code == 200
    assert checked_items(html) == [f"{a.pk}:{a.payload_hash}" for a in (first, second, third)]
    first_args = html.split('id="batch-first-args"')[1].split("</table>")[0]
    assert "A-1" in first_args and "101" in first_args
    row = html.split(f'data-item="{third.pk}"')[1].split("</tr>")[0]
    assert "<del>A-1</del> <ins>A-3</ins>" in row
    assert "<del>101</del> <ins>103</ins>" in row
    assert "Approve selected" in html and "Reject selected" in html


def test_approving_the_selection_with_one_stale_item_decides_the_others_and_reports_it(
    demo_policy, alice, bob, carol
):
    first, stale, third, left_out = refunds(alice, count=4)
    page = client_for(bob)
    posted = [v for v in checked_items(page.get(BATCH).content.decode())][:3]
    with transaction.atomic():  # changed after bob loaded the page
        locked = ApprovalRequest.objects.select_for_update().get(pk=stale.pk)
        round_start(approval=locked, args={"order_id": "A-2", "amount": 900}, by=carol)

    response = page.post(DECIDE, {"decision": "approve", "item": posted, "message": "ok"})

    assert response.status_code == 200
    html = response.content.decode()
    results = html.split('id="batch-results"')[1].split("</section>")[0]
    assert re.search(rf'data-result="{first.pk}" data-status="200".*?Approved', results, re.S)
    assert re.search(rf'data-result="{third.pk}" data-status="200".*?Approved', results, re.S)
    assert re.search(
        rf'data-result="{stale.pk}" data-status="409".*?changed since you loaded it, open it alone',
        results,
        re.S,
    )
    statuses = dict(ApprovalRequest.objects.values_list("pk", "status"))
    assert [statuses[a.pk] for a in (first, stale, third, left_out)] == [
        "approved",
        "pending",
        "approved",
        "pending",
    ]
    # What is left of the batch stays below: the stale one (new hash) and the unselected one.
    assert checked_items(html) == [
        f"{a.pk}:{ApprovalRequest.objects.get(pk=a.pk).payload_hash}" for a in (stale, left_out)
    ]


def test_a_quorum_tier_says_waiting_for_more_approvers(demo_policy, alice, bob):
    approvals = refunds(alice, tier="critical", count=2)
    url = reverse("approvals:batch-decide", args=["refund_agent", "refund_order", "critical"])
    posted = [f"{a.pk}:{a.payload_hash}" for a in approvals]

    response = client_for(bob).post(url, {"decision": "approve", "item": posted})

    assert response.content.decode().count("Waiting for more approvers (1 of 2)") == 2
    assert ApprovalVote.objects.count() == 2


def test_an_item_of_another_tier_posted_to_a_batch_is_400_and_nothing_is_decided(
    demo_policy, alice, carol
):
    writes = refunds(alice, count=2)
    (critical,) = refunds(alice, tier="critical", count=1)
    posted = [f"{a.pk}:{a.payload_hash}" for a in (*writes, critical)]

    response = client_for(carol).post(DECIDE, {"decision": "approve", "item": posted})

    assert response.status_code == 400
    assert "a batch never crosses agents, tools or tiers" in response.content.decode()
    assert not ApprovalVote.objects.exists()


def test_nothing_selected_or_a_malformed_item_is_400(demo_policy, alice, bob):
    refunds(alice, count=2)
    page = client_for(bob)

    assert page.post(DECIDE, {"decision": "approve"}).status_code == 400
    assert page.post(DECIDE, {"decision": "approve", "item": ["x:y"]}).status_code == 400
    assert page.post(DECIDE, {"decision": "edit", "item": ["1:y"]}).status_code == 400
    assert not ApprovalVote.objects.exists()


def test_a_reader_without_the_tier_sees_an_empty_batch(demo_policy, alice, dave):
    first, _ = refunds(alice, count=2)

    response = client_for(dave).get(BATCH)

    assert response.status_code == 200
    assert "Nothing in this batch waits for you" in response.content.decode()
    assert first.payload_hash not in response.content.decode()


def test_the_batch_page_reads_the_same_queries_for_3_or_30_items(
    demo_policy, alice, bob, django_assert_max_num_queries
):
    refunds(alice, count=3)
    page = client_for(bob)
    page.get(BATCH)  # the session and the policy cache warm
    with django_assert_max_num_queries(30) as small:
        page.get(BATCH)
    refunds(alice, count=27)

    with django_assert_max_num_queries(len(small.captured_queries)):
        assert len(checked_items(page.get(BATCH).content.decode())) == 30
