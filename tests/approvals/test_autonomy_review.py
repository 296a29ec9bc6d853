"""Reviewing an action after the fact (approvals/services/autonomy_review.py): who may, one
review per action, an undo enqueues the compensation once on commit, audit in the same
transaction."""

from __future__ import annotations

from unittest import mock

import pytest
from django.utils import timezone

from approvals.autonomy_models import AutonomousAction
from approvals.contract import AUTONOMY_UNDO_TASK
from approvals.services import (
    ReviewConflict,
    ReviewForbidden,
    ReviewInvalid,
    autonomous_action_review,
    autonomy_review,
)
from audit.models import AuditEvent
from audit.private import event_data_open
from tests.support.autonomy import AutonomousActionFactory
from tests.support.factories import RunFactory
from tests.support.queue import tasks_named

pytestmark = pytest.mark.django_db
Review = AutonomousAction.Review


@pytest.fixture
def action(demo_policy, alice) -> AutonomousAction:
    return AutonomousActionFactory(run=RunFactory(requested_by=alice, status="running"))


def test_a_write_reviewer_marks_an_action_fine_and_the_audit_says_so(bob, action, queued):
    reviewed = autonomous_action_review(action=action, user=bob, verdict="fine", note="ok by me")

    row = AutonomousAction.objects.get(pk=action.pk)
    assert (row.review, row.reviewed_by, row.review_note) == (Review.FINE, bob, "ok by me")
    assert reviewed.reviewed_at is not None
    event = AuditEvent.objects.get(action="autonomy.reviewed")
    data = event_data_open(event)
    assert (event.actor_username, event.run_id, event.tool) == ("bob", action.run_id, action.tool)
    assert (data["verdict"], data["autonomous_action_id"], data["key"]) == (
        "fine",
        action.pk,
        action.key,
    )
    assert data["note"] == "ok by me"
    assert tasks_named(queued, AUTONOMY_UNDO_TASK) == []


def test_the_runs_requester_may_not_review_its_action_four_eyes(demo_policy, bob, queued):
    action = AutonomousActionFactory(run=RunFactory(requested_by=bob, status="running"))

    with pytest.raises(ReviewForbidden, match="four eyes") as refused:
        autonomous_action_review(action=action, user=bob, verdict="fine")

    assert refused.value.status_code == 403
    assert AutonomousAction.objects.get(pk=action.pk).review == Review.PENDING
    assert not AuditEvent.objects.filter(action__startswith="autonomy.").exists()


def test_someone_who_may_decide_nothing_may_review_nothing(dave, action):
    with pytest.raises(ReviewForbidden):
        autonomous_action_review(action=action, user=dave, verdict="fine")
    assert AutonomousAction.objects.get(pk=action.pk).review == Review.PENDING


def test_a_critical_action_needs_a_member_of_the_tiers_required_group(
    demo_policy, alice, bob, carol, queued
):
    action = AutonomousActionFactory(run=RunFactory(requested_by=alice), tier="critical")

    with pytest.raises(ReviewForbidden, match="approvers-critical"):
        autonomous_action_review(action=action, user=bob, verdict="fine")
    autonomous_action_review(action=action, user=carol, verdict="fine")

    assert AutonomousAction.objects.get(pk=action.pk).reviewed_by == carol


def test_a_second_review_gets_a_conflict_naming_the_current_state(bob, carol, action, queued):
    autonomous_action_review(action=action, user=bob, verdict="fine")

    with pytest.raises(ReviewConflict) as conflict:
        autonomous_action_review(action=action, user=carol, verdict="undo")

    assert conflict.value.status_code == 409
    assert conflict.value.extra()["review"] == "fine"
    assert conflict.value.extra()["reviewed_by"] == "bob"
    assert "fine" in conflict.value.message
    assert AutonomousAction.objects.get(pk=action.pk).reviewed_by == bob
    assert tasks_named(queued, AUTONOMY_UNDO_TASK) == []
    assert AuditEvent.objects.filter(action__startswith="autonomy.").count() == 1


def test_an_undo_enqueues_the_compensation_once_and_only_on_commit(
    bob, carol, action, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        autonomous_action_review(action=action, user=bob, verdict="undo")
        assert tasks_named(queued, AUTONOMY_UNDO_TASK) == []  # not before the commit
    for callback in callbacks:
        callback()
    with pytest.raises(ReviewConflict), django_capture_on_commit_callbacks(execute=True):
        autonomous_action_review(action=action, user=carol, verdict="undo")

    assert tasks_named(queued, AUTONOMY_UNDO_TASK) == [(AUTONOMY_UNDO_TASK, action.pk)]
    row = AutonomousAction.objects.get(pk=action.pk)
    assert (row.review, row.reviewed_by) == (Review.UNDOING, bob)
    event = AuditEvent.objects.get(action="autonomy.undo_requested")
    assert event_data_open(event)["verdict"] == "undo"


def test_a_review_whose_audit_event_fails_changes_nothing(bob, action, queued):
    with (
        mock.patch.object(autonomy_review, "event_record", side_effect=RuntimeError("audit down")),
        pytest.raises(RuntimeError),
    ):
        autonomous_action_review(action=action, user=bob, verdict="undo")

    row = AutonomousAction.objects.get(pk=action.pk)
    assert (row.review, row.reviewed_by) == (Review.PENDING, None)
    assert tasks_named(queued, AUTONOMY_UNDO_TASK) == []


def test_an_erased_runs_action_can_no_longer_be_reviewed(bob, action):
    type(action.run).objects.filter(pk=action.run_id).update(erased_at=timezone.now())
    action = AutonomousAction.objects.select_related("run").get(pk=action.pk)

    with pytest.raises(ReviewConflict) as conflict:
        autonomous_action_review(action=action, user=bob, verdict="fine")

    assert conflict.value.reason == "erased"


@pytest.mark.parametrize(
    ("verdict", "note", "field"),
    [("approve", "", "verdict"), ("fine", "a\x00b", "note"), ("undo", "x" * 4001, "note")],
)
def test_bad_input_is_refused_naming_the_field(bob, action, verdict, note, field):
    with pytest.raises(ReviewInvalid) as refused:
        autonomous_action_review(action=action, user=bob, verdict=verdict, note=note)

    assert list(refused.value.errors) == [field]
    assert AutonomousAction.objects.get(pk=action.pk).review == Review.PENDING
