"""Quorum: critical needs two distinct approvers, one of them from approvers-critical."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest, ApprovalVote
from approvals.services import DecisionConflict, DecisionForbidden
from audit.models import AuditEvent
from audit.private import event_data_open
from tests.support.approvals import decide, request_approval
from tests.support.queue import tasks_named

ADVANCE = "agents.tasks.run_advance"


def test_critical_stays_pending_after_one_approval_and_is_final_after_the_second(
    demo_policy, alice, bob, carol, queued, django_capture_on_commit_callbacks
):
    approval = request_approval(requester=alice, tier="critical")

    with django_capture_on_commit_callbacks(execute=True):
        first = decide(approval, bob)
    assert first.status == ApprovalRequest.Status.PENDING
    assert tasks_named(queued, ADVANCE) == []

    with django_capture_on_commit_callbacks(execute=True):
        final = decide(approval, carol, message="ok")
    assert final.status == ApprovalRequest.Status.APPROVED
    assert final.decision["by"] == "bob, carol"
    assert final.decision["decision"] == "approve"
    assert tasks_named(queued, ADVANCE) == [(ADVANCE, str(approval.run_id))]
    assert AuditEvent.objects.filter(action="approval.voted", approval_id=approval.id).count() == 2
    decided = AuditEvent.objects.get(action="approval.decided", approval_id=approval.id)
    assert decided.data["quorum"] == {"required": 2, "approvers": ["bob", "carol"]}


def test_the_same_person_twice_gets_a_409_and_counts_once(demo_policy, alice, carol):
    approval = request_approval(requester=alice, tier="critical")
    decide(approval, carol)

    with pytest.raises(DecisionConflict) as exc:
        decide(approval, carol)

    assert exc.value.reason == "already_voted"
    assert exc.value.status_code == 409
    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.PENDING
    assert ApprovalVote.objects.filter(approval=approval).count() == 1


def test_two_approvers_without_the_required_group_cannot_complete_the_quorum(
    demo_policy, alice, bob, erin
):
    erin.groups.add(demo_policy["approvers-write"])  # a second write approver, not critical
    approval = request_approval(requester=alice, tier="critical")
    decide(approval, bob)

    with pytest.raises(DecisionForbidden, match="approvers-critical"):
        decide(approval, erin)

    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.PENDING


def test_any_two_of_n_distinct_approvers_complete_it_when_one_is_carol(
    demo_policy, alice, carol, erin
):
    erin.groups.add(demo_policy["approvers-write"])  # a second write approver, not critical
    approval = request_approval(requester=alice, tier="critical")
    decide(approval, carol)

    final = decide(approval, erin)

    assert final.status == ApprovalRequest.Status.APPROVED
    assert final.decided_by_label == "carol, erin"


def test_a_reject_by_anyone_allowed_is_final_at_once(demo_policy, alice, bob, carol):
    approval = request_approval(requester=alice, tier="critical")
    decide(approval, carol)

    final = decide(approval, bob, decision="reject", message="too much")

    assert final.status == ApprovalRequest.Status.REJECTED
    assert final.decision["decision"] == "reject"
    assert final.decision["by"] == "bob"
    with pytest.raises(DecisionConflict) as exc:
        decide(approval, carol)
    assert exc.value.reason == "already_decided"


def test_write_needs_one_approval(demo_policy, alice, bob):
    approval = request_approval(requester=alice, tier="write")

    assert decide(approval, bob).status == ApprovalRequest.Status.APPROVED


def test_an_edit_short_of_quorum_starts_a_new_round_for_the_edited_args(
    demo_policy, alice, bob, carol
):
    approval = request_approval(
        requester=alice, tier="critical", args={"order_id": "A-1", "amount": 120}
    )
    decide(approval, bob)  # round 0: 1 of 2 for amount 120
    old_hash = ApprovalRequest.objects.get(pk=approval.pk).payload_hash

    edited = decide(approval, carol, decision="edit", args={"order_id": "A-1", "amount": 100})

    assert edited.status == ApprovalRequest.Status.PENDING
    assert edited.quorum_round == 1
    assert edited.args == {"order_id": "A-1", "amount": 100}
    assert edited.original_args == {"order_id": "A-1", "amount": 120}
    assert edited.payload_hash != old_hash
    # Bob's earlier vote was for other args: reviewers who loaded the old payload get 409,
    # and bob may vote again on the edited args.
    with pytest.raises(DecisionConflict) as exc:
        decide(approval, bob, seen_hash=old_hash)
    assert exc.value.reason == "hash_mismatch"

    final = decide(approval, bob)

    assert final.status == ApprovalRequest.Status.EDITED
    assert final.decision["decision"] == "edit"
    assert final.decision["args"] == {"order_id": "A-1", "amount": 100}
    assert final.decision["by"] == "carol, bob"
    event = AuditEvent.objects.get(action="approval.decided", approval_id=approval.id)
    assert event_data_open(event)["diff"] == {"amount": {"from": 120, "to": 100}}
