"""What changed while an approval waited, decided from where the reviewer is: a signed link's
page shows the changes and asks for the same confirmation as the approval page (the link stays
usable until then); a Slack press cannot confirm them and sends the reviewer to the console."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest, DecisionLink, RiskTier
from approvals.services import policy_change_record
from audit.models import AuditEvent
from tests.approvals.test_decision_links import link_decide, link_page, token_for
from tests.approvals.test_slack import (  # noqa: F401 - fixtures
    buttons,
    press,
    receiver,
    slack,
    slack_message_of,
)
from tests.support.approvals import request_approval
from tests.support.people import client_for


def tier_write_changed(actor) -> None:
    tier = RiskTier.objects.get(name="write")
    tier.ttl_seconds += 60
    tier.save()
    policy_change_record(obj=tier, change="changed", actor=actor)


def status_of(approval: ApprovalRequest) -> str:
    approval.refresh_from_db()
    return approval.status


@pytest.fixture
def waiting(demo_policy, alice) -> ApprovalRequest:
    return request_approval(requester=alice, tier="write")


def test_a_link_for_an_approval_whose_policy_changed_asks_to_confirm_and_stays_usable(
    waiting, bob, admin
):
    token = token_for(waiting, bob)
    tier_write_changed(admin)
    client = client_for(bob)

    page = client.get(link_page(token)).content.decode()
    assert 'id="changes-banner"' in page and 'name="changes_seen"' in page

    refused = client.post(link_decide(token), {"decision": "approve"})
    assert refused.status_code == 428
    assert 'id="changes-banner"' in refused.content.decode()
    assert status_of(waiting) == ApprovalRequest.Status.PENDING
    assert DecisionLink.objects.get(recipient=bob, approval=waiting).used_at is None

    digest = refused.context["changes_digest"]
    decided = client.post(link_decide(token), {"decision": "approve", "changes_seen": digest})
    assert decided.status_code == 302
    assert status_of(waiting) == ApprovalRequest.Status.APPROVED
    voted = AuditEvent.objects.get(action="approval.voted", approval_id=waiting.pk)
    assert (voted.data["via"], voted.data["warned"]) == ("link", ["policy"])


def test_a_slack_press_on_an_approval_whose_policy_changed_sends_the_reviewer_to_the_console(
    slack,  # noqa: F811 - the fixture imported above
    receiver,  # noqa: F811 - the fixture imported above
    alice,
    admin,
):
    approval = request_approval(requester=alice, tier="write")
    value = buttons(slack_message_of(approval, receiver))["approve"]["value"]
    tier_write_changed(admin)

    answer = press(slack, value).json()

    assert answer["response_type"] == "ephemeral"
    assert "changed while it waited" in answer["text"] and "console" in answer["text"]
    assert status_of(approval) == ApprovalRequest.Status.PENDING
    assert not AuditEvent.objects.filter(action="approval.voted").exists()
