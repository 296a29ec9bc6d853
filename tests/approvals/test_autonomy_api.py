"""The review-after-the-fact API: /api/autonomous-actions/ (list, filters), one action, and
its review (200 with the row, 409 once reviewed, 403 when not allowed, 400 naming the field)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from approvals.autonomy_models import AutonomousAction
from approvals.contract import AUTONOMY_UNDO_TASK
from tests.support.autonomy import AutonomousActionFactory
from tests.support.factories import RunFactory
from tests.support.people import rest_client_for
from tests.support.queue import tasks_named

pytestmark = pytest.mark.django_db
Review = AutonomousAction.Review
LIST = "/api/autonomous-actions/"


@pytest.fixture
def run(demo_policy, alice):
    return RunFactory(requested_by=alice, status="running")


@pytest.fixture
def action(run) -> AutonomousAction:
    return AutonomousActionFactory(run=run)


def review(client, action, **body):
    return client.post(f"{LIST}{action.pk}/review/", body, format="json")


def test_the_list_is_oldest_first_and_filters_by_review_and_tool(bob, run):
    first = AutonomousActionFactory(run=run)
    fine = AutonomousActionFactory(run=run, review=Review.FINE)
    ticket = AutonomousActionFactory(run=run, tool="create_ticket")
    client = rest_client_for(bob)

    everything = client.get(LIST).json()
    pending = client.get(LIST, {"review": "pending"}).json()
    tickets = client.get(LIST, {"tool": "create_ticket"}).json()

    assert [row["id"] for row in everything["results"]] == [first.pk, fine.pk, ticket.pk]
    assert [row["id"] for row in pending["results"]] == [first.pk, ticket.pk]
    assert [row["id"] for row in tickets["results"]] == [ticket.pk]
    row = everything["results"][0]
    assert row["key"] == first.key and row["draw"] == first.draw and row["review"] == "pending"
    assert row["on_deny"].startswith("The refund is reversed")
    assert (row["requested_by"], row["mode"], row["tier"]) == ("alice", "post_hoc", "write")


def test_mine_lists_only_what_waits_for_my_review(alice, bob, action):
    assert [
        r["id"] for r in rest_client_for(bob).get(LIST, {"mine": "true"}).json()["results"]
    ] == [action.pk]
    assert rest_client_for(alice).get(LIST, {"mine": "true"}).json()["results"] == []
    refused = rest_client_for(bob).get(LIST, {"mine": "true", "review": "fine"})
    assert refused.status_code == 400 and "mine" in refused.json()["errors"]


def test_a_bad_filter_is_400_naming_it(bob):
    response = rest_client_for(bob).get(LIST, {"review": "maybe"})

    assert response.status_code == 400
    assert "review" in response.json()["errors"]


def test_the_detail_says_whether_the_reader_may_review_it(alice, bob, dave, action):
    as_bob = rest_client_for(bob).get(f"{LIST}{action.pk}/").json()
    as_alice = rest_client_for(alice).get(f"{LIST}{action.pk}/").json()

    assert (as_bob["can_review"], as_alice["can_review"]) == (True, False)
    assert as_bob["args"] == action.args
    assert rest_client_for(dave).get(f"{LIST}{action.pk}/").status_code == 404
    assert rest_client_for(bob).get(f"{LIST}x/").status_code == 404


def test_fine_answers_200_with_the_row(bob, action, queued):
    response = review(rest_client_for(bob), action, verdict="fine", note="checked")

    assert response.status_code == 200
    body = response.json()
    assert (body["review"], body["reviewed_by"], body["review_note"]) == ("fine", "bob", "checked")
    assert tasks_named(queued, AUTONOMY_UNDO_TASK) == []


def test_undo_enqueues_the_compensation_and_a_second_review_gets_409(
    bob, carol, action, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        first = review(rest_client_for(bob), action, verdict="undo")
        second = review(rest_client_for(carol), action, verdict="fine")

    assert first.status_code == 200 and first.json()["review"] == "undoing"
    assert second.status_code == 409
    body = second.json()
    assert (body["reason"], body["review"], body["reviewed_by"]) == (
        "already_reviewed",
        "undoing",
        "bob",
    )
    assert "review" in body["errors"]
    assert tasks_named(queued, AUTONOMY_UNDO_TASK) == [(AUTONOMY_UNDO_TASK, action.pk)]


def test_the_requester_is_refused_with_403(alice, action):
    response = review(rest_client_for(alice), action, verdict="fine")

    assert response.status_code == 403
    assert "four eyes" in response.json()["detail"]


def test_someone_who_cannot_see_it_gets_404_not_403(dave, action):
    assert review(rest_client_for(dave), action, verdict="fine").status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "verdict"),
        ({"verdict": "approve"}, "verdict"),
        ({"verdict": "fine", "note": "x" * 4001}, "note"),
    ],
)
def test_a_bad_review_is_400_naming_the_field(bob, action, body, field):
    response = review(rest_client_for(bob), action, **body)

    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert AutonomousAction.objects.get(pk=action.pk).review == Review.PENDING


def test_an_erased_runs_action_answers_409(bob, action):
    type(action.run).objects.filter(pk=action.run_id).update(erased_at=timezone.now())

    response = review(rest_client_for(bob), action, verdict="fine")

    assert response.status_code == 409 and response.json()["reason"] == "erased"
