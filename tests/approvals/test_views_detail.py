"""The approval page: the exact action, escaping, the decision panel, the edit form."""

from __future__ import annotations

from django.urls import reverse

from core.sealed_fields import field_seal
from tests.support.pages import REFUND_ARGS, PageApprovalFactory, refund_payload
from tests.support.people import client_for

HOSTILE = "<img src=x onerror=alert(1)>"
ESCAPED = "&lt;img src=x onerror=alert(1)&gt;"


def _url(approval) -> str:
    return reverse("approvals:detail", args=[approval.pk])


def test_the_page_shows_the_action_its_reasons_and_the_run(bob, approval, run_of_alice):
    as_bob = client_for(bob)
    html = as_bob.get(_url(approval)).content.decode()
    assert "<code>order_id</code>" in html and "A-1001" in html
    assert "The parcel arrived broken; the customer sent photos." in html
    assert "order A-1001 delivered 2 days late" in html
    assert "damage.jpg" in html
    assert "Refunds 120 USD on order A-1001" in html
    assert str(run_of_alice.pk) in html
    assert "0 of 1</strong> approval needed" in html
    assert f'data-expires="{approval.expires_at.isoformat()}"' in html


def test_hostile_args_and_reasons_render_as_text(bob, run_of_alice):
    as_bob = client_for(bob)
    args = {**REFUND_ARGS, "order_id": HOSTILE}
    payload = refund_payload(
        args,
        rationale=f"because {HOSTILE}",
        evidence=[HOSTILE, {"html": HOSTILE}],
        blast_radius=f"touches {HOSTILE}",
    )
    hostile = PageApprovalFactory(run=run_of_alice, args=args, payload=payload)
    html = as_bob.get(_url(hostile)).content.decode()
    assert ESCAPED in html
    assert HOSTILE not in html
    assert "onerror=alert(1)>" not in html
    # In the queue too.
    queue = as_bob.get(reverse("approvals:queue")).content.decode()
    assert HOSTILE not in queue


def test_a_hostile_tool_name_and_raw_payload_render_as_text(bob, run_of_alice):
    as_bob = client_for(bob)
    odd = PageApprovalFactory(
        run=run_of_alice,
        tool=HOSTILE,
        args={},
        payload={"question": HOSTILE, "type": "other"},
        allowed_decisions=["respond"],
    )
    html = as_bob.get(_url(odd)).content.decode()
    assert HOSTILE not in html
    assert ESCAPED in html


def test_the_payload_hash_travels_with_every_decision_form(bob, approval):
    as_bob = client_for(bob)
    html = as_bob.get(_url(approval)).content.decode()
    assert html.count(f'name="seen_hash" value="{approval.payload_hash}"') == 4


def test_only_the_allowed_decisions_are_offered(bob, run_of_alice):
    as_bob = client_for(bob)
    limited = PageApprovalFactory(run=run_of_alice, allowed_decisions=["approve", "reject"])
    html = as_bob.get(_url(limited)).content.decode()
    assert 'value="approve"' in html
    assert 'value="reject"' in html
    assert 'value="edit"' not in html
    assert 'value="respond"' not in html


def test_an_unknown_payload_is_shown_raw_with_a_respond_box_only(bob, run_of_alice):
    as_bob = client_for(bob)
    odd = PageApprovalFactory(
        run=run_of_alice,
        tool="(agent question)",
        args={},
        payload={"value": "Which region should I restart first?"},
        allowed_decisions=["respond"],
    )
    html = as_bob.get(_url(odd)).content.decode()
    assert "Which region should I restart first?" in html
    assert 'value="respond"' in html
    assert 'value="approve"' not in html
    assert 'value="edit"' not in html


def test_the_edit_form_is_generated_from_the_args_schema(bob, approval):
    as_bob = client_for(bob)
    html = as_bob.get(_url(approval)).content.decode()
    # One input per property, typed by the schema, with labels and required markers.
    assert 'name="args-order_id"' in html and 'maxlength="40"' in html
    assert 'type="number" name="args-amount"' in html and 'max="500"' in html
    assert '<select name="args-reason"' in html and '<option value="late"' in html
    assert 'type="checkbox" name="args-notify"' in html
    assert 'name="args-note"' in html
    assert '<label for="id_args-amount">Amount <span class="required"' in html
    assert '<label for="id_args-note">Note</label>' in html


def test_the_requester_sees_the_approval_but_cannot_decide_it(alice, approval):
    as_alice = client_for(alice)
    html = as_alice.get(_url(approval)).content.decode()
    assert "four eyes" in html
    assert 'name="decision"' not in html


def test_someone_without_access_gets_not_found(dave, approval):
    as_dave = client_for(dave)
    assert as_dave.get(_url(approval)).status_code == 404


def test_the_status_partial_says_who_decided(bob, run_of_alice, carol):
    as_bob = client_for(bob)
    decided = PageApprovalFactory(run=run_of_alice, status="rejected")
    type(decided).objects.filter(pk=decided.pk).update(
        decided_by=carol,
        decided_by_label="carol",
        decision=field_seal(  # an update() takes only sealed values
            type(decided), "decision", decided.run_id, {"decision": "reject", "message": "no"}
        ),
    )
    response = as_bob.get(_url(decided), {"part": "status"}, headers={"HX-Request": "true"})
    html = response.content.decode()
    assert "<html" not in html
    assert 'data-status="rejected"' in html
    assert "<strong>carol</strong> rejected this" in html
