"""Hostile review of checkpoint retention: inputs an admin or operator may legitimately give
that must not break the pass for every agent, nor touch a run they should not."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from agents.forms import RetentionPolicyAdminForm
from agents.models import PrunedRun, RetentionPolicy
from agents.runtime import retention
from approvals.models import AgentRun
from tests.support.people import person
from tests.support.retention import checkpoint_rows, finished_run

pytestmark = pytest.mark.django_db(transaction=True)

# Valid for the model and the admin form (a PositiveIntegerField): "practically forever".
MILLION_DAYS = 1_000_000


def test_a_policy_of_a_million_days_keeps_its_runs_and_the_pass_still_prunes_the_others(
    note_agent, alice, bob
):
    form = RetentionPolicyAdminForm(
        data={"agent": "note_agent", "keep_days": str(MILLION_DAYS), "action": "delete"}
    )
    assert form.is_valid(), form.errors
    retention.retention_policy_save(policy=form.save(commit=False), actor=alice, created=True)
    kept = finished_run(alice, bob, topic="kept")
    before = checkpoint_rows(kept)
    other = finished_run(alice, bob, topic="other")
    AgentRun.objects.filter(pk=other.pk).update(agent="other_agent")  # on the 30-day default

    result = retention.checkpoints_prune_pass()

    assert result.final == [str(other.pk)]
    assert checkpoint_rows(kept) == before
    assert not PrunedRun.objects.filter(run_id=kept.pk).exists()


def test_the_ops_page_shows_a_policy_of_a_million_days(alice):
    RetentionPolicy.objects.create(agent="note_agent", keep_days=MILLION_DAYS)
    staff = person("sam")
    staff.is_staff = True
    staff.save()
    client = Client()
    client.force_login(staff)

    response = client.get(reverse("ops"))

    assert response.status_code == 200
    assert "note_agent" in response.content.decode()


def test_a_default_of_a_million_days_keeps_every_run(note_agent, alice, bob, settings):
    settings.CHECKPOINT_RETENTION_DAYS = MILLION_DAYS
    run = finished_run(alice, bob)
    before = checkpoint_rows(run)

    result = retention.checkpoints_prune_pass()

    assert result.runs == 0 and checkpoint_rows(run) == before


def test_a_run_pruned_to_final_is_deleted_once_its_agents_policy_becomes_delete(
    note_agent, alice, bob
):
    """The admin changes an agent's policy to "delete" (say, its final states hold personal
    data): every due run of that agent loses its thread, those pruned to final before too."""
    run = finished_run(alice, bob)
    assert retention.checkpoints_prune_pass().final == [str(run.pk)]
    assert checkpoint_rows(run)["checkpoints"] == 1
    policy = RetentionPolicy(agent="note_agent", keep_days=7, action="delete")
    retention.retention_policy_save(policy=policy, actor=alice, created=True)

    result = retention.checkpoints_prune_pass()

    assert result.deleted == [str(run.pk)]
    assert checkpoint_rows(run) == {"checkpoints": 0, "writes": 0, "blobs": 0}
    assert PrunedRun.objects.get(run_id=run.pk).outcome == "delete"
    assert retention.checkpoints_prune_pass().runs == 0  # done once
