"""Recovery wakes a run whose wake-up was requested while a worker that then died held it."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from agents import tasks
from agents.runtime import advance, lease
from agents.services import run_start
from approvals import services as approval_services
from approvals.models import AgentRun
from tests.support.queue import tasks_named

pytestmark = pytest.mark.django_db


def test_a_decision_made_while_a_worker_that_died_held_the_waiting_run_is_recovered(
    note_agent, alice, bob, queued, settings, django_capture_on_commit_callbacks
):
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
    advance.run_advance(run_id=run.id)
    assert AgentRun.objects.get(pk=run.pk).status == "waiting"
    # A worker takes the waiting run and dies before it gives the lease back (it had moved the
    # run to waiting: the status and the approvals are committed, the release never happens).
    assert lease.lease_acquire(run_id=run.id, owner="dies-holding-it") is not None
    approval = run.approvals.get()
    with django_capture_on_commit_callbacks(execute=True):
        approval_services.approval_decide(
            approval=approval, user=bob, decision="approve", seen_hash=approval.payload_hash
        )
    # The decision's own advance came while the lease was live: skipped, the wake flag set.
    assert advance.run_advance(run_id=run.id).startswith("skipped")
    assert AgentRun.objects.get(pk=run.pk).wake_requested
    # Long after, the dead worker's lease has lapsed; nothing else will ever queue the run.
    long_ago = timezone.now() - dt.timedelta(seconds=settings.Q_RETRY + 5)
    AgentRun.objects.filter(pk=run.pk).update(lease_expires_at=long_ago, updated_at=long_ago)
    before = len(tasks_named(queued, "agents.tasks.run_advance"))

    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.runs_recover() == 1

    assert len(tasks_named(queued, "agents.tasks.run_advance")) == before + 1
    assert not advance.run_advance(run_id=run.id).startswith("skipped")
