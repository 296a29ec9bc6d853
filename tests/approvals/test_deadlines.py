"""What happens if nobody decides: the tier's default decision and when it applies, the reminder
and the escalation still due, on the approval page and in the API; nothing once decided."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.urls import reverse

from approvals.deadlines import approval_deadlines
from approvals.models import RiskTier
from tests.support.pages import PageApprovalFactory
from tests.support.people import client_for, rest_client_for

NOW = dt.datetime(2025, 3, 4, 7, 45, tzinfo=dt.UTC)
AT = {
    "expires_at": dt.datetime(2025, 3, 4, 8, 5, tzinfo=dt.UTC),
    "remind_at": dt.datetime(2025, 3, 4, 8, 0, tzinfo=dt.UTC),
    "escalate_at": dt.datetime(2025, 3, 4, 7, 48, tzinfo=dt.UTC),
}


@pytest.fixture(autouse=True)
def _now():
    with time_machine.travel(NOW, tick=False):
        yield


def pending(run_of_alice, **fields):
    return PageApprovalFactory(run=run_of_alice, created_at=NOW, **{**AT, **fields})


def page_of(user, approval) -> str:
    response = client_for(user).get(reverse("approvals:detail", args=[approval.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_a_reject_tier_says_when_the_approval_is_rejected_reminded_and_escalated(
    demo_policy, run_of_alice, bob
):
    approval = pending(run_of_alice)
    html = page_of(bob, approval)
    assert "If nobody decides" in html
    assert (
        'At <time datetime="2025-03-04T08:05:00+00:00">08:05 UTC</time> this is rejected as '
        "system:timeout." in html
    )
    assert (
        'At <time datetime="2025-03-04T08:00:00+00:00">08:00 UTC</time> the approvers get a '
        "reminder." in html
    )
    assert (
        'At <time datetime="2025-03-04T07:48:00+00:00">07:48 UTC</time> it escalates: members '
        "of approvers-critical may decide too, and are told." in html
    )


def test_an_approve_tier_warns_that_the_action_runs_if_nobody_decides(
    demo_policy, run_of_alice, bob
):
    RiskTier.objects.filter(name="write").update(expiry_decision="approve")
    approval = pending(run_of_alice, remind_at=None, escalate_at=None)
    html = page_of(bob, approval)
    assert (
        "08:05 UTC</time> this is <strong>approved</strong> as system:timeout: the action runs "
        "as proposed." in html
    )
    assert "reminder" not in html and "escalates" not in html


def test_an_approve_tier_says_reject_when_the_request_does_not_allow_approve(
    demo_policy, run_of_alice, bob
):
    RiskTier.objects.filter(name="write").update(expiry_decision="approve")
    approval = pending(
        run_of_alice, remind_at=None, escalate_at=None, allowed_decisions=["reject", "respond"]
    )
    assert approval_deadlines(approval=approval).decision == "reject"
    assert "08:05 UTC</time> this is rejected as system:timeout." in page_of(bob, approval)


def test_an_approve_tier_says_the_edited_args_run_after_an_edit_vote(
    demo_policy, run_of_alice, bob
):
    RiskTier.objects.filter(name="write").update(expiry_decision="approve")
    approval = pending(run_of_alice, remind_at=None, escalate_at=None)
    approval.original_args = approval.args
    approval.args = {**approval.args, "edited": True}
    approval.save(update_fields=["original_args", "args"])
    assert approval_deadlines(approval=approval).decision == "edit"
    assert "the action runs with the edited args of this round." in page_of(bob, approval)


def test_without_a_tier_row_the_default_is_reject_and_nothing_else_is_due(run_of_alice, bob):
    approval = pending(run_of_alice, remind_at=None, escalate_at=None)
    deadlines = approval_deadlines(approval=approval)
    assert (deadlines.decision, deadlines.by) == ("reject", "system:timeout")
    assert deadlines.escalation_group is None
    html = page_of(bob, approval)
    assert "this is rejected as system:timeout" in html
    assert "reminder" not in html and "escalates" not in html


def test_a_reminder_and_escalation_already_done_are_said_in_the_past(
    demo_policy, run_of_alice, bob
):
    approval = pending(
        run_of_alice, remind_at=None, escalate_at=None, reminded=True, escalated=True
    )
    html = page_of(bob, approval)
    assert "The approvers were reminded at" in html
    assert "It escalated at" in html and "members of approvers-critical may decide too" in html


def test_a_deadline_on_another_day_shows_its_date(demo_policy, run_of_alice, bob):
    approval = pending(
        run_of_alice,
        expires_at=dt.datetime(2025, 3, 5, 9, 0, tzinfo=dt.UTC),
        remind_at=None,
        escalate_at=None,
    )
    assert "2025-03-05 09:00 UTC</time> this is rejected" in page_of(bob, approval)


def test_a_decided_approval_shows_nothing_of_this(demo_policy, run_of_alice, bob):
    approval = pending(run_of_alice, status="approved", decided_by=bob, decided_by_label="bob")
    assert approval_deadlines(approval=approval) is None
    assert "If nobody decides" not in page_of(bob, approval)
    detail = rest_client_for(bob).get(f"/api/approvals/{approval.pk}/").json()
    assert detail["if_nobody_decides"] is None


def test_the_api_says_what_happens_if_nobody_decides_and_if_denied(demo_policy, run_of_alice, bob):
    approval = pending(run_of_alice, extra_payload={"on_deny": "Order A-1001 is not refunded."})
    detail = rest_client_for(bob).get(f"/api/approvals/{approval.pk}/").json()
    assert detail["if_nobody_decides"] == {
        "at": "2025-03-04T08:05:00Z",
        "decision": "reject",
        "by": "system:timeout",
        "remind_at": "2025-03-04T08:00:00Z",
        "reminded_at": None,
        "escalate_at": "2025-03-04T07:48:00Z",
        "escalated_at": None,
        "escalation_group": "approvers-critical",
    }
    assert detail["on_deny"] == "Order A-1001 is not refunded."
    assert detail["changes"] == [] and detail["changes_digest"] == ""


def test_the_page_shows_the_if_denied_line_beside_reject_and_in_why(demo_policy, run_of_alice, bob):
    approval = pending(run_of_alice, extra_payload={"on_deny": "Order A-1001 is not refunded."})
    html = page_of(bob, approval)
    assert "<dt>If denied</dt><dd data-on-deny>Order A-1001 is not refunded.</dd>" in html
    reject_form = html[html.index('id="decide-reject"') :]
    reject_form = reject_form[: reject_form.index("</form>")]
    assert "<strong>If you reject:</strong> Order A-1001 is not refunded." in reject_form
