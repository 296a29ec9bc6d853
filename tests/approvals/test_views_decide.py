"""Deciding through the page: approve, edit (inline errors, diff, confirm), reject, respond,
and a second decision that must not happen."""

from __future__ import annotations

import re

from django.urls import reverse

from approvals.models import ApprovalRequest
from audit.canonical import payload_hash
from audit.models import AuditEvent
from audit.private import event_data_open
from tests.support.pages import PageApprovalFactory
from tests.support.people import client_for


def _decide(approval) -> str:
    return reverse("approvals:decide", args=[approval.pk])


def _edit_fields(**overrides) -> dict[str, str]:
    fields = {
        "args-order_id": "A-1001",
        "args-amount": "120",
        "args-reason": "damaged",
        "args-notify": "on",
        "args-note": "",
    }
    fields.update(overrides)
    return fields


def test_approve_decides_and_returns_to_the_queue(
    bob, approval, queued, django_capture_on_commit_callbacks
):
    as_bob = client_for(bob)
    with django_capture_on_commit_callbacks(execute=True):
        response = as_bob.post(
            _decide(approval), {"decision": "approve", "seen_hash": approval.payload_hash}
        )
    assert response.status_code == 302
    assert response["Location"] == reverse("approvals:queue")
    approval.refresh_from_db()
    assert approval.status == "approved"
    assert approval.decided_by == bob
    assert queued.call_count == 1  # the run's advance was queued
    page = as_bob.get(response["Location"]).content.decode()
    assert "You approved refund_payment" in page


def test_an_invalid_edit_shows_an_error_next_to_each_bad_field(bob, approval):
    as_bob = client_for(bob)
    response = as_bob.post(
        _decide(approval),
        {
            "decision": "edit",
            "seen_hash": approval.payload_hash,
            "confirmed": "1",
            **_edit_fields(**{"args-amount": "900", "args-order_id": "x" * 41}),
        },
    )
    assert response.status_code == 400
    html = response.content.decode()
    amount_field = re.search(
        r'<div class="field has-error">\s*<label for="id_args-amount">.*?</div>', html, re.S
    )
    order_field = re.search(
        r'<div class="field has-error">\s*<label for="id_args-order_id">.*?</div>', html, re.S
    )
    assert amount_field and "900 is greater than the maximum of 500" in amount_field.group(0)
    assert order_field and "is too long" in order_field.group(0)
    assert 'value="900"' in html  # what the reviewer typed stays
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_an_edit_needs_its_diff_seen_before_it_is_confirmed(bob, approval):
    as_bob = client_for(bob)
    fields = {
        "decision": "edit",
        "seen_hash": approval.payload_hash,
        **_edit_fields(**{"args-amount": "80"}),
    }
    preview = as_bob.post(_decide(approval), fields)
    html = preview.content.decode()
    assert preview.status_code == 200
    assert "<del>120</del>" in html and "<ins>80</ins>" in html
    assert 'name="confirmed" value="1"' in html
    approval.refresh_from_db()
    assert approval.status == "pending"

    previewed = re.search(r'name="previewed" value="([0-9a-f]+)"', html).group(1)
    done = as_bob.post(_decide(approval), {**fields, "previewed": previewed, "confirmed": "1"})
    assert done.status_code == 302
    approval.refresh_from_db()
    assert approval.status == "edited"
    assert approval.decision["args"] == {
        "order_id": "A-1001",
        "amount": 80,
        "reason": "damaged",
        "notify": True,
    }
    event = AuditEvent.objects.get(action="approval.decided", approval_id=approval.pk)
    assert event_data_open(event)["diff"] == {"amount": {"from": 120, "to": 80}}


def test_values_changed_after_the_preview_are_previewed_again(bob, approval):
    as_bob = client_for(bob)
    stale = payload_hash({**approval.args, "amount": 80})
    response = as_bob.post(
        _decide(approval),
        {
            "decision": "edit",
            "seen_hash": approval.payload_hash,
            "confirmed": "1",
            "previewed": stale,
            **_edit_fields(**{"args-amount": "60"}),
        },
    )
    html = response.content.decode()
    assert "changed after your preview" in html
    assert "<ins>60</ins>" in html
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_the_htmx_preview_returns_the_edit_form_with_its_diff(bob, approval):
    as_bob = client_for(bob)
    response = as_bob.post(
        reverse("approvals:edit-preview", args=[approval.pk]),
        {
            "decision": "edit",
            "seen_hash": approval.payload_hash,
            **_edit_fields(**{"args-reason": "late"}),
        },
        headers={"HX-Request": "true"},
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<form method="post"')
    assert 'id="edit-form"' in html
    assert "<del>damaged</del>" in html and "<ins>late</ins>" in html


def test_the_htmx_preview_shows_inline_errors(bob, approval):
    as_bob = client_for(bob)
    response = as_bob.post(
        reverse("approvals:edit-preview", args=[approval.pk]),
        {
            "decision": "edit",
            "seen_hash": approval.payload_hash,
            **_edit_fields(**{"args-amount": "abc"}),
        },
        headers={"HX-Request": "true"},
    )
    html = response.content.decode()
    assert "Enter a number." in html
    assert 'name="confirmed"' not in html


def test_reject_sends_the_message(bob, approval):
    as_bob = client_for(bob)
    response = as_bob.post(
        _decide(approval),
        {
            "decision": "reject",
            "seen_hash": approval.payload_hash,
            "message": "Refund the shipping only.",
        },
    )
    assert response.status_code == 302
    approval.refresh_from_db()
    assert approval.status == "rejected"
    assert approval.decision["message"] == "Refund the shipping only."


def test_respond_needs_a_message(bob, approval):
    as_bob = client_for(bob)
    response = as_bob.post(
        _decide(approval),
        {"decision": "respond", "seen_hash": approval.payload_hash, "message": " "},
    )
    assert response.status_code == 400
    assert "required to respond" in response.content.decode()
    approval.refresh_from_db()
    assert approval.status == "pending"

    response = as_bob.post(
        _decide(approval),
        {
            "decision": "respond",
            "seen_hash": approval.payload_hash,
            "message": "Check stock first.",
        },
    )
    assert response.status_code == 302
    approval.refresh_from_db()
    assert approval.status == "responded"


def test_a_decision_that_is_not_allowed_is_refused(bob, run_of_alice):
    as_bob = client_for(bob)
    limited = PageApprovalFactory(run=run_of_alice, allowed_decisions=["approve", "reject"])
    response = as_bob.post(
        _decide(limited),
        {"decision": "respond", "seen_hash": limited.payload_hash, "message": "hi"},
    )
    assert response.status_code == 400
    limited.refresh_from_db()
    assert limited.status == "pending"


def test_a_second_decision_shows_who_decided_and_changes_nothing(bob, carol, approval):
    as_bob = client_for(bob)
    as_carol = client_for(carol)
    as_bob.post(_decide(approval), {"decision": "approve", "seen_hash": approval.payload_hash})
    response = as_carol.post(
        _decide(approval),
        {"decision": "reject", "seen_hash": approval.payload_hash, "message": "no"},
    )
    assert response.status_code == 409
    html = response.content.decode()
    assert "bob already approved this approval" in html
    assert "Your decision was not recorded." in html
    assert 'name="decision"' not in html  # no panel for a decided approval
    approval.refresh_from_db()
    assert approval.status == "approved"
    assert (
        AuditEvent.objects.filter(action="approval.decided", approval_id=approval.pk).count() == 1
    )


def test_a_stale_payload_hash_is_refused(bob, approval):
    as_bob = client_for(bob)
    response = as_bob.post(_decide(approval), {"decision": "approve", "seen_hash": "0" * 64})
    assert response.status_code == 409
    assert "reload and review it again" in response.content.decode()
    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.PENDING


def test_the_requester_cannot_decide_through_the_page(alice, approval):
    as_alice = client_for(alice)
    response = as_alice.post(
        _decide(approval), {"decision": "approve", "seen_hash": approval.payload_hash}
    )
    assert response.status_code == 403
    approval.refresh_from_db()
    assert approval.status == "pending"
