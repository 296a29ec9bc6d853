"""The review-after-the-fact pages: the queue (/after/), one action's page, and its review
(fine, undo) through the page; the nav's link and badge."""

from __future__ import annotations

import pytest
from django.db import connection
from django.urls import reverse

from approvals.autonomy_models import AutonomousAction, AutonomyRule
from approvals.contract import AUTONOMY_UNDO_TASK
from tests.support.autonomy import AutonomousActionFactory, AutonomyRuleFactory
from tests.support.factories import RunFactory
from tests.support.people import client_for
from tests.support.queue import tasks_named

pytestmark = pytest.mark.django_db
Review = AutonomousAction.Review
QUEUE = "/after/"


@pytest.fixture
def action(demo_policy, alice) -> AutonomousAction:
    rule = AutonomyRuleFactory(mode=AutonomyRule.Mode.SAMPLED, sample_percent=100)
    return AutonomousActionFactory(
        run=RunFactory(requested_by=alice, status="running"),
        rule=rule,
        mode=AutonomyRule.Mode.SAMPLED,
        sample_percent=100,
    )


def _detail(action: AutonomousAction) -> str:
    return reverse("approvals:after-detail", args=[action.pk])


def _review(action: AutonomousAction) -> str:
    return reverse("approvals:after-review", args=[action.pk])


def test_the_queue_lists_what_waits_for_the_reviewer_linked_from_the_nav(bob, action):
    page = client_for(bob).get(QUEUE)

    body = page.content.decode()
    assert page.status_code == 200
    assert "Review after the fact" in body
    assert f'data-key="action-{action.pk}"' in body
    assert "sampled 100%: draw" in body
    assert "Waiting for review" in body
    assert "<strong data-waiting>1</strong> waiting for you" in body
    assert '<a href="/after/" aria-current="page">After the fact</a>' in body


def test_the_requester_sees_nothing_waiting_for_them_but_finds_it_among_all(alice, action):
    client = client_for(alice)

    waiting = client.get(QUEUE).content.decode()
    everything = client.get(QUEUE, {"view": "all"}).content.decode()

    assert f'data-key="action-{action.pk}"' not in waiting
    assert "<strong data-waiting>0</strong>" in waiting
    assert f'data-key="action-{action.pk}"' in everything


def test_the_queue_filters_by_tool_and_answers_htmx_with_the_table(bob, action):
    other = AutonomousActionFactory(run=action.run, tool="create_ticket")
    client = client_for(bob)

    page = client.get(QUEUE, {"tool": "create_ticket"}, headers={"HX-Request": "true"})

    body = page.content.decode()
    assert body.lstrip().startswith('<section id="after-table"')
    assert f'data-key="action-{other.pk}"' in body
    assert f'data-key="action-{action.pk}"' not in body


def test_the_detail_says_why_it_ran_and_what_the_undo_does(bob, action):
    page = client_for(bob).get(_detail(action))

    body = page.content.decode()
    assert page.status_code == 200
    threshold = action.sample_percent * 100
    assert f"<strong>{action.draw}</strong> &lt; 100% × 100 = {threshold}" in body
    assert f"rule #{action.rule_id}" in body
    assert "The undo runs the tool's compensating action exactly once." in body
    assert "the customer is charged the amount again" in body
    assert "Refunds 120 USD on order A-1001" in body  # the blast radius
    assert 'id="review-fine"' in body and 'id="review-undo"' in body


def test_the_requester_sees_the_detail_without_the_review_buttons(alice, action):
    body = client_for(alice).get(_detail(action)).content.decode()

    assert 'id="review-fine"' not in body
    assert "four eyes" in body


def test_someone_who_may_not_see_the_run_gets_404(dave, action):
    assert client_for(dave).get(_detail(action)).status_code == 404
    assert client_for(dave).post(_review(action), {"verdict": "fine"}).status_code == 404


def test_fine_through_the_page_returns_to_the_queue(bob, action):
    response = client_for(bob).post(_review(action), {"verdict": "fine"})

    assert response.status_code == 302 and response["Location"] == QUEUE
    assert AutonomousAction.objects.get(pk=action.pk).review == Review.FINE


def test_undo_through_the_page_shows_the_action_undoing_and_polls(
    bob, action, queued, django_capture_on_commit_callbacks
):
    client = client_for(bob)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(_review(action), {"verdict": "undo", "note": "wrong order"})

    assert response.status_code == 302 and response["Location"] == _detail(action)
    assert tasks_named(queued, AUTONOMY_UNDO_TASK) == [(AUTONOMY_UNDO_TASK, action.pk)]
    card = client.get(_detail(action), {"part": "status"}, headers={"HX-Request": "true"})
    body = card.content.decode()
    assert body.lstrip().startswith('<section id="action-review"')
    assert 'data-review="undoing"' in body and 'hx-trigger="every 2s"' in body
    assert "“wrong order”" in body


def test_a_second_review_through_the_page_is_409_and_shows_who_reviewed(bob, carol, action):
    client_for(bob).post(_review(action), {"verdict": "fine"})

    response = client_for(carol).post(_review(action), {"verdict": "undo"})

    body = response.content.decode()
    assert response.status_code == 409
    assert 'id="conflict"' in body and "reviewed by bob" in body
    assert 'id="review-fine"' not in body


def test_an_unknown_verdict_is_400_naming_it(bob, action):
    response = client_for(bob).post(_review(action), {"verdict": "maybe"})

    assert response.status_code == 400
    assert "Unknown verdict." in response.content.decode()


def _queries(client, url: str) -> int:
    """The queries of one request (as tests/audit/test_page_queries.py counts them)."""
    connection.force_debug_cursor = True
    try:
        response = client.get(url)
        count = len(connection.queries)
    finally:
        connection.force_debug_cursor = False
    assert response.status_code == 200, (url, response.status_code)
    return count


@pytest.mark.parametrize("url", ["/after/", "/after/?view=all", "detail"])
def test_the_pages_read_as_many_queries_at_30_actions_as_at_3(bob, action, url):
    client = client_for(bob)
    url = _detail(action) if url == "detail" else url
    for _ in range(2):
        AutonomousActionFactory(run=action.run)
    few = _queries(client, url)

    for _ in range(27):
        AutonomousActionFactory(run=RunFactory(requested_by=action.run.requested_by))
    many = _queries(client, url)

    assert many == few
    assert many <= 20
