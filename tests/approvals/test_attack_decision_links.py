"""Attacks on signed decision links: a recipient who lost the right to decide the approval
learns nothing of it from the link, on its page or in a refused decision."""

from __future__ import annotations

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest, DecisionLink
from tests.approvals.test_decision_links import link_decide, link_page, status_of, token_for
from tests.support.approvals import request_approval
from tests.support.people import client_for


@pytest.fixture
def waiting(demo_policy, alice) -> ApprovalRequest:
    """Alice's refund in tier "write": bob and carol are asked by e-mail."""
    return request_approval(requester=alice, tier="write")


def test_a_recipient_who_left_the_approver_group_sees_nothing_of_the_approval_by_the_link(
    waiting, bob, demo_policy
):
    token = token_for(waiting, bob)
    client = client_for(bob)
    bob.groups.remove(demo_policy["approvers-write"])
    assert client.get(reverse("approvals:detail", args=[waiting.pk])).status_code == 404

    for response in (
        client.get(link_page(token)),
        client.post(link_decide(token), {"decision": "approve"}),
    ):
        html = response.content.decode()
        assert response.status_code == 403
        assert "Only members of approvers-write" in html
        assert "A-1" not in html and "charged twice" not in html
        assert 'id="link-approve"' not in html

    assert status_of(waiting) == ApprovalRequest.Status.PENDING
    assert DecisionLink.objects.get(recipient=bob, approval=waiting).used_at is None
    bob.groups.add(demo_policy["approvers-write"])  # allowed again: the same link works
    assert client.get(link_page(token)).status_code == 200
