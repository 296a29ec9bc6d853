"""A rejection's reason (ApprovalRequest.reject_reason): chosen on the page or sent to the API,
kept on the approval and in the "approval.decided" audit event, refused when it is not one of
the choices or comes with another decision."""

from __future__ import annotations

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest
from approvals.services import DecisionInvalid
from audit.models import AuditEvent
from tests.support.approvals import decide
from tests.support.people import client_for, rest_client_for

pytestmark = pytest.mark.django_db


def _api_decide(client, approval, **body):
    body.setdefault("payload_hash", approval.payload_hash)
    return client.post(f"/api/approvals/{approval.id}/decision/", body, format="json")


def test_the_api_keeps_a_rejections_reason_and_audits_it(bob, approval):
    response = _api_decide(
        rest_client_for(bob), approval, decision="reject", message="No.", reason="unsafe"
    )

    assert response.status_code == 200
    assert response.json()["reject_reason"] == "unsafe"
    approval.refresh_from_db()
    assert (approval.status, approval.reject_reason) == ("rejected", "unsafe")
    event = AuditEvent.objects.get(action="approval.decided", approval_id=approval.id)
    assert event.data["reason"] == "unsafe"


def test_a_rejection_without_a_reason_keeps_none(bob, approval):
    response = _api_decide(rest_client_for(bob), approval, decision="reject", message="No.")

    assert response.status_code == 200
    assert response.json()["reject_reason"] == ""
    event = AuditEvent.objects.get(action="approval.decided", approval_id=approval.id)
    assert "reason" not in event.data


def test_the_api_refuses_a_reason_that_is_not_a_choice_naming_the_field(bob, approval):
    response = _api_decide(
        rest_client_for(bob), approval, decision="reject", message="No.", reason="boring"
    )

    assert response.status_code == 400
    assert "reason" in response.json()["errors"]
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_the_api_refuses_a_reason_with_an_approval(bob, approval):
    response = _api_decide(rest_client_for(bob), approval, decision="approve", reason="other")

    assert response.status_code == 400
    assert "reason" in response.json()["errors"]
    approval.refresh_from_db()
    assert approval.status == "pending"


@pytest.mark.parametrize(("decision", "reason"), [("respond", "other"), ("reject", "nope")])
def test_the_service_refuses_a_reason_it_cannot_keep(bob, approval, decision, reason):
    with pytest.raises(DecisionInvalid) as refused:
        decide(approval, bob, decision, message="No.", reason=reason)
    assert "reason" in refused.value.errors


def test_the_page_offers_the_reasons_with_reject_and_keeps_the_one_chosen(bob, approval):
    as_bob = client_for(bob)
    page = as_bob.get(reverse("approvals:detail", args=[approval.pk])).content.decode()
    assert 'name="reason"' in page
    assert '<option value="wrong_amount">Wrong amount</option>' in page

    response = as_bob.post(
        reverse("approvals:decide", args=[approval.pk]),
        {
            "decision": "reject",
            "seen_hash": approval.payload_hash,
            "message": "Too much.",
            "reason": "wrong_amount",
        },
    )

    assert response.status_code == 302
    approval.refresh_from_db()
    assert approval.reject_reason == ApprovalRequest.RejectReason.WRONG_AMOUNT
    decided = as_bob.get(reverse("approvals:detail", args=[approval.pk])).content.decode()
    assert 'data-reject-reason="wrong_amount"' in decided


def test_the_page_refuses_an_unknown_reason_with_400(bob, approval):
    response = client_for(bob).post(
        reverse("approvals:decide", args=[approval.pk]),
        {"decision": "reject", "seen_hash": approval.payload_hash, "reason": "boring"},
    )

    assert response.status_code == 400
    assert "Unknown rejection reason" in response.content.decode()
    approval.refresh_from_db()
    assert approval.status == "pending"
