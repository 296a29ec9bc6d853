"""Hostile review of checkpoint retention: inputs an admin or operator may legitimately give
that must not break the pass for every agent, nor touch a run they should not."""

from __future__ import annotations

import sqlite3
import uuid

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from agents.forms import RetentionPolicyAdminForm
from agents.models import PrunedRun, RetentionPolicy
from agents.runtime import advance, retention
from agents.runtime.checkpoint import checkpointer_get
from agents.services import run_start
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


# The parameters one SQLite statement may bind in stock builds (SQLITE_MAX_VARIABLE_NUMBER
# since 3.32, e.g. python.org's and Homebrew's); Debian raises it to 250000.
SQLITE_STOCK_VARIABLES = 32_766
BIG_BATCH = SQLITE_STOCK_VARIABLES // 2 + 20


def _sqlite_stock_limits() -> None:
    """Give this process's SQLite connections the stock build's limit on bound parameters."""
    if connection.vendor != "sqlite":
        return
    connection.ensure_connection()
    for conn in (connection.connection, checkpointer_get().conn):
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, SQLITE_STOCK_VARIABLES)


def test_a_large_batch_prunes_every_run_in_it_and_no_live_thread(note_agent, alice, bob):
    """`checkpoints_prune --batch N` (or CHECKPOINT_PRUNE_BATCH=N) to catch up a backlog: the
    docs promise a few set-based statements whatever the batch, on both databases."""
    _sqlite_stock_limits()
    real = finished_run(alice, bob, topic="real")
    live = run_start(agent="note_agent", input={"topic": "live"}, user=alice)
    assert advance.run_advance(run_id=live.id) == "waiting"
    live_rows = checkpoint_rows(live)
    AgentRun.objects.bulk_create(
        [
            AgentRun(
                id=run_id,
                thread_id=str(run_id),
                agent="note_agent",
                graph_version=real.graph_version,
                status=AgentRun.Status.COMPLETED,
                requested_by=alice,
                finished_at=real.finished_at,
            )
            for run_id in (uuid.uuid4() for _ in range(BIG_BATCH))
        ],
        batch_size=2000,
    )

    result = retention.checkpoints_prune_pass(limit=BIG_BATCH + 1)

    assert result.runs == BIG_BATCH + 1 and result.deferred == []
    assert str(real.pk) in result.final
    assert checkpoint_rows(real)["checkpoints"] == 1
    assert checkpoint_rows(live) == live_rows
    assert PrunedRun.objects.count() == BIG_BATCH + 1


def test_runs_pruned_to_final_are_deleted_once_the_default_action_becomes_delete(
    note_agent, alice, bob, settings
):
    """The same change made with CHECKPOINT_RETENTION_ACTION (a restart, no admin save)."""
    run = finished_run(alice, bob)
    assert retention.checkpoints_prune_pass().final == [str(run.pk)]
    settings.CHECKPOINT_RETENTION_ACTION = "delete"

    result = retention.checkpoints_prune_pass()

    assert result.deleted == [str(run.pk)]
    assert checkpoint_rows(run) == {"checkpoints": 0, "writes": 0, "blobs": 0}
    settings.CHECKPOINT_RETENTION_ACTION = "final"  # and back: nothing more to do
    assert retention.checkpoints_prune_pass().runs == 0
