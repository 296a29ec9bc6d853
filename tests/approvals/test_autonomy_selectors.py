"""Who sees and who is asked to review actions that ran without waiting
(approvals/autonomy_selectors.py)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from approvals.autonomy_models import AutonomousAction
from approvals.autonomy_selectors import (
    COUNT_CAP,
    autonomous_action_count,
    autonomous_action_counts,
    autonomous_action_get,
    autonomous_action_list,
    autonomous_action_queue,
    count_label,
)
from tests.support.autonomy import AutonomousActionFactory
from tests.support.factories import RunFactory
from tests.support.people import person

pytestmark = pytest.mark.django_db
Review = AutonomousAction.Review


@pytest.fixture
def run(demo_policy, alice):
    return RunFactory(requested_by=alice, status="running")


def test_the_queue_holds_pending_actions_of_tiers_one_may_review_oldest_first(bob, carol, run):
    now = timezone.now()
    newer = AutonomousActionFactory(run=run, created_at=now - dt.timedelta(minutes=1))
    older = AutonomousActionFactory(run=run, created_at=now - dt.timedelta(hours=1))
    critical = AutonomousActionFactory(run=run, tier="critical")
    AutonomousActionFactory(run=run, review=Review.FINE)
    AutonomousActionFactory(run=run, review=Review.NOT_SAMPLED)

    assert list(autonomous_action_queue(user=bob)) == [older, newer]
    assert list(autonomous_action_queue(user=carol)) == [older, newer, critical]
    assert list(autonomous_action_queue(user=carol, tier="critical")) == [critical]
    assert autonomous_action_count(user=bob) == 2


def test_nobody_is_asked_to_review_their_own_runs_actions(bob, demo_policy):
    AutonomousActionFactory(run=RunFactory(requested_by=bob))

    assert list(autonomous_action_queue(user=bob)) == []


def test_a_reviewer_sees_an_action_of_their_tier_on_a_run_without_approvals(bob, dave, run):
    action = AutonomousActionFactory(run=run)

    assert autonomous_action_get(pk=action.pk, fetched_by=bob) == action
    with pytest.raises(AutonomousAction.DoesNotExist):
        autonomous_action_get(pk=action.pk, fetched_by=dave)


def test_the_requester_the_owner_group_and_compliance_see_it_but_review_nothing(
    alice, frank, dave, run
):
    team = Group.objects.create(name="agent-owners")
    mallory = person("mallory", groups=[team])
    owned = AutonomousActionFactory(run=RunFactory(requested_by=dave, owner_group=team))
    action = AutonomousActionFactory(run=run)

    assert list(autonomous_action_list(fetched_by=alice)) == [action]
    assert list(autonomous_action_list(fetched_by=mallory)) == [owned]
    assert set(autonomous_action_list(fetched_by=frank)) == {action, owned}
    assert autonomous_action_count(user=frank) == 0


def test_the_counts_split_the_actions_one_sees_by_review(bob, run):
    for review in (Review.PENDING, Review.FINE, Review.UNDOING, Review.UNDONE, Review.UNDO_FAILED):
        AutonomousActionFactory(run=run, review=review)
    AutonomousActionFactory(run=run, review=Review.NOT_SAMPLED)

    counts = autonomous_action_counts(user=bob)

    assert counts == {"pending": 1, "fine": 1, "undone": 3, "all": 5}


def test_the_badges_figure_reads_a_bounded_number_of_ids_and_never_counts_them_all(
    bob, run, django_assert_max_num_queries
):
    for _ in range(COUNT_CAP + 2):
        AutonomousActionFactory(run=run)

    # bob's groups and permissions (3), the tiers and their groups (2), one capped read.
    with django_assert_max_num_queries(6) as queries:
        count = autonomous_action_count(user=bob)

    assert (count, count_label(count)) == (COUNT_CAP + 1, f"{COUNT_CAP}+")
    assert not [q["sql"] for q in queries.captured_queries if "COUNT(" in q["sql"].upper()]
