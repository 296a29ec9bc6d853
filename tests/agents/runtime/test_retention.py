"""Checkpoint retention (agents/runtime/retention.py): finished runs past their policy are
pruned to their final checkpoint or deleted, in bounded passes, audited, and a queued, waiting
or running thread is never touched.

Real runs of the note agent, driven in-process. Transactional: on Postgres the prune deletes on
Django's connection while the graph reads on the checkpointer's pool, which sees only what is
committed, so each test commits what it does.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from agents import selectors as agent_selectors
from agents import services as agent_services
from agents.models import PrunedRun, RetentionCursor, RetentionPass, RetentionPolicy
from agents.runtime import advance, retention
from agents.runtime.checkpoint import checkpointer_get
from agents.services import run_start
from agents.tasks import checkpoints_prune
from approvals.models import AgentRun
from audit.models import AuditEvent
from audit.verify import chain_verify_db
from tests.support.retention import OLD, checkpoint_rows, finished_run, thread_state

pytestmark = pytest.mark.django_db(transaction=True)


def test_prune_to_final_keeps_the_final_state_readable_and_removes_older_checkpoints(
    note_agent, alice, bob
):
    run = finished_run(alice, bob)
    before = checkpoint_rows(run)
    final = thread_state(run)
    assert before["checkpoints"] > 2 and before["writes"] > 0

    result = retention.checkpoints_prune_pass()

    assert result.final == [str(run.pk)] and result.deleted == []
    after = checkpoint_rows(run)
    assert after["checkpoints"] == 1
    assert after["writes"] == 0  # the final checkpoint of a finished run has no pending writes
    if connection.vendor == "postgresql":
        assert 0 < after["blobs"] < before["blobs"]
    assert result.rows.checkpoints == before["checkpoints"] - 1
    assert result.rows.writes == before["writes"] - after["writes"]
    assert result.rows.blobs == before["blobs"] - after["blobs"]
    state = thread_state(run)
    assert state.values == final.values
    assert state.values["log"] == ["propose", "approve", "executed"]
    assert (
        state.config["configurable"]["checkpoint_id"]
        == (final.config["configurable"]["checkpoint_id"])
    )
    assert state.next == ()
    history = agent_selectors.run_history(run=run)
    assert [step["checkpoint_id"] for step in history] == [
        final.config["configurable"]["checkpoint_id"]
    ]
    assert history[0]["forkable"] is False
    assert PrunedRun.objects.get(run_id=run.pk).outcome == "final"


def test_delete_removes_the_thread(note_agent, alice, bob):
    RetentionPolicy.objects.create(agent="note_agent", keep_days=7, action="delete")
    run = finished_run(alice, bob)
    before = checkpoint_rows(run)

    result = retention.checkpoints_prune_pass()

    assert result.deleted == [str(run.pk)]
    assert checkpoint_rows(run) == {"checkpoints": 0, "writes": 0, "blobs": 0}
    assert result.rows.checkpoints == before["checkpoints"]
    assert result.rows.writes == before["writes"]
    assert result.rows.blobs == before["blobs"]
    assert agent_selectors.run_history(run=run) == []
    run.refresh_from_db()
    assert run.output["log"] == ["propose", "approve", "executed"]  # the run row keeps it


def test_retention_skips_live_threads_and_runs_finished_too_recently(note_agent, alice, bob):
    old = timezone.now() - OLD
    queued = run_start(agent="note_agent", input={"topic": "queued"}, user=alice)
    waiting = run_start(agent="note_agent", input={"topic": "waiting"}, user=alice)
    assert advance.run_advance(run_id=waiting.id) == "waiting"
    running = run_start(agent="note_agent", input={"topic": "running"}, user=alice)
    assert advance.run_advance(run_id=running.id) == "waiting"
    AgentRun.objects.filter(pk=running.pk).update(
        status=AgentRun.Status.RUNNING,
        lease_owner="worker-1",
        lease_expires_at=timezone.now() + dt.timedelta(seconds=30),
    )
    # Even a live run carrying an old finished_at (data from elsewhere) is never taken.
    AgentRun.objects.filter(pk__in=[queued.pk, waiting.pk, running.pk]).update(finished_at=old)
    recent = finished_run(alice, bob, topic="recent", age=dt.timedelta(days=29))
    live = [AgentRun.objects.get(pk=r.pk) for r in (waiting, running, recent)]
    before = {r.pk: checkpoint_rows(r) for r in live}

    assert retention.retention_candidates() == []
    result = retention.checkpoints_prune_pass()

    assert result.runs == 0 and result.deferred == []
    assert {r.pk: checkpoint_rows(r) for r in live} == before
    assert all(before[r.pk]["checkpoints"] > 0 for r in live)
    assert not PrunedRun.objects.exists()
    assert not AuditEvent.objects.filter(action="checkpoints.pruned").exists()


def test_keep_days_zero_keeps_finished_runs_forever(note_agent, alice, bob):
    RetentionPolicy.objects.create(agent="note_agent", keep_days=0, action="delete")
    run = finished_run(alice, bob, age=dt.timedelta(days=3650))
    before = checkpoint_rows(run)

    assert retention.checkpoints_prune_pass().runs == 0
    assert checkpoint_rows(run) == before


def test_batches_are_bounded_and_each_pass_goes_on_where_the_last_stopped(
    note_agent, alice, bob, settings
):
    settings.CHECKPOINT_PRUNE_BATCH = 2
    runs = [
        finished_run(alice, bob, topic=f"t{i}", age=OLD + dt.timedelta(hours=i)) for i in range(3)
    ]
    oldest_first = sorted(runs, key=lambda r: r.finished_at)

    first = retention.checkpoints_prune_pass()
    second = retention.checkpoints_prune_pass()
    third = retention.checkpoints_prune_pass()

    assert first.final == [str(r.pk) for r in oldest_first[:2]]
    assert second.final == [str(oldest_first[2].pk)]
    assert third.runs == 0
    cursor = RetentionCursor.objects.get(scope="")
    assert cursor.run_id == oldest_first[2].pk
    assert RetentionPass.objects.count() == 2  # an empty pass records nothing


TAKEN = {
    # An advance holds the lease (a cancelled run's compensation does, for one).
    "leased": lambda: {
        "lease_owner": "worker-2",
        "lease_expires_at": timezone.now() + dt.timedelta(seconds=30),
    },
    # The run is live again (no path of this code does that to a finished run; the check
    # at prune time must not rely on it).
    "resumed": lambda: {"status": AgentRun.Status.RUNNING},
}


@pytest.mark.parametrize("how", sorted(TAKEN))
def test_a_run_taken_between_selection_and_prune_is_not_touched(note_agent, alice, bob, how):
    run = finished_run(alice, bob)
    candidates = retention.retention_candidates()
    assert [c.run_id for c in candidates] == [run.pk]
    AgentRun.objects.filter(pk=run.pk).update(**TAKEN[how]())
    before = checkpoint_rows(run)

    result = retention.checkpoints_prune(candidates)

    assert result.deferred == [str(run.pk)] and result.runs == 0
    assert checkpoint_rows(run) == before
    assert not PrunedRun.objects.exists()
    # Once the worker lets go, the next pass takes it: the deferral did not skip it.
    AgentRun.objects.filter(pk=run.pk).update(
        lease_owner="", lease_expires_at=None, status=AgentRun.Status.COMPLETED
    )
    assert retention.checkpoints_prune_pass().final == [str(run.pk)]


def test_a_run_whose_advance_was_asked_for_is_deferred(note_agent, alice, bob):
    run = finished_run(alice, bob)
    candidates = retention.retention_candidates()
    AgentRun.objects.filter(pk=run.pk).update(wake_requested=True)

    assert retention.checkpoints_prune(candidates).deferred == [str(run.pk)]
    assert checkpoint_rows(run)["checkpoints"] > 1


def test_the_audit_event_holds_counts_and_run_ids_never_contents(note_agent, alice, bob):
    runs = [finished_run(alice, bob, topic=f"secret-{i}") for i in range(2)]
    before = [checkpoint_rows(r) for r in runs]

    result = retention.checkpoints_prune_pass()

    event = AuditEvent.objects.get(action="checkpoints.pruned")
    assert event.actor == "system:retention"
    data = event.data
    assert data["runs"] == 2 and data["pruned_to_final"] == 2 and data["deleted"] == 0
    assert data["checkpoints"] == sum(b["checkpoints"] for b in before) - 2
    assert data["checkpoints"] == result.rows.checkpoints
    assert data["writes"] == result.rows.writes > 0
    assert data["blobs"] == result.rows.blobs
    assert sorted(data["run_ids"]["pruned_to_final"]) == sorted(str(r.pk) for r in runs)
    assert "secret" not in str(data)
    assert chain_verify_db().ok


def test_the_scheduled_task_and_the_command_run_the_same_pass(note_agent, alice, bob):
    first = finished_run(alice, bob, topic="a")
    summary = checkpoints_prune()
    assert summary["runs"] == 1 and summary["pruned_to_final"] == 1
    assert PrunedRun.objects.filter(run_id=first.pk).exists()

    second = finished_run(alice, bob, topic="b")
    call_command("checkpoints_prune", "--dry-run", stdout=(out := _Out()))
    assert "1 run(s) due" in out.text
    call_command("checkpoints_prune", "--until-done", stdout=(out := _Out()))
    assert "pass 1: runs 1" in out.text
    assert PrunedRun.objects.filter(run_id=second.pk).exists()


class _Out:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


def test_a_pruned_run_cannot_be_forked_and_says_why(note_agent, alice, bob):
    run = finished_run(alice, bob)
    first_step = agent_selectors.run_history(run=run)[0]["checkpoint_id"]
    retention.checkpoints_prune_pass()

    with pytest.raises(agent_services.ForkRefused, match="pruned by retention"):
        agent_services.run_fork(run=run, checkpoint_id=first_step, user=bob)
    with pytest.raises(agent_selectors.CheckpointPruned, match="pruned by retention"):
        agent_selectors.run_state_at(run=run, checkpoint_id=first_step)


def _statements_of_a_pass() -> tuple[int, retention.PassResult]:
    """Statements one pass sends: Django's, and on SQLite those in the checkpoint file."""
    from django.test.utils import CaptureQueriesContext

    sqlite: list[str] = []
    saver = checkpointer_get()
    if connection.vendor == "sqlite":
        saver.conn.set_trace_callback(sqlite.append)
    try:
        with CaptureQueriesContext(connection) as django:
            result = retention.checkpoints_prune_pass()
    finally:
        if connection.vendor == "sqlite":
            saver.conn.set_trace_callback(None)
    return len(django.captured_queries) + len(sqlite), result


def test_a_pass_sends_the_same_statements_for_two_runs_as_for_five(note_agent, alice, bob):
    finished_run(alice, bob, topic="first")
    assert retention.checkpoints_prune_pass().runs == 1  # each scope's cursor now exists
    for i in range(2):
        finished_run(alice, bob, topic=f"two-{i}")
    two, two_result = _statements_of_a_pass()
    for i in range(5):
        finished_run(alice, bob, topic=f"five-{i}")
    five, five_result = _statements_of_a_pass()

    assert (two_result.runs, five_result.runs) == (2, 5)
    assert five_result.rows.checkpoints > two_result.rows.checkpoints
    assert two == five  # set-based: no statement per run or per row
