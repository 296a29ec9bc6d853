"""A worker that lost its lease cannot move the run's thread (invariant 6, class 7 of Trust I):
it writes no checkpoint once it cannot be sure of its lease, and a checkpoint it still managed
to write never becomes the head once the new owner has written one (agents/runtime/fenced_saver)."""

from __future__ import annotations

import time

import pytest
from langgraph.checkpoint.base import copy_checkpoint
from langgraph.checkpoint.base.id import uuid6

from agents.runtime import advance
from agents.runtime.checkpoint import checkpointer_get, graph_for, thread_config
from agents.runtime.fenced_saver import head_lineage
from agents.selectors import run_history
from agents.services import run_start
from approvals.models import AgentRun
from tests.support import agents as note_module
from tests.support.approvals import decide

pytestmark = pytest.mark.django_db(transaction=True)


def _waiting_run(note_agent, alice, bob) -> tuple[AgentRun, object]:
    """A note run that waited for its approval (epoch 1) and was approved; returns the run and
    the checkpoint it waited at."""
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    waited = checkpointer_get().get_tuple(thread_config(run))
    assert waited.metadata["lease_epoch"] == AgentRun.objects.get(pk=run.pk).lease_epoch == 1
    decide(run.approvals.get(), bob)
    return run, waited


def _stale_put(run: AgentRun, waited, *, epoch: int) -> str:
    """What a stale worker of ``epoch`` writes late: a successor of the checkpoint it last saw."""
    stale = copy_checkpoint(waited.checkpoint)
    stale["id"] = str(uuid6())
    parent = {
        "configurable": {
            "thread_id": run.thread_id,
            "checkpoint_ns": "",
            "checkpoint_id": waited.config["configurable"]["checkpoint_id"],
            "lease_epoch": epoch,
        }
    }
    checkpointer_get().put(parent, stale, {"source": "loop", "step": 99}, {})
    return stale["id"]


def test_a_checkpoint_written_late_by_a_worker_that_lost_its_lease_never_becomes_the_head(
    note_agent, alice, bob
):
    run, waited = _waiting_run(note_agent, alice, bob)
    assert advance.run_advance(run_id=run.id) == "completed"  # the new owner: epoch 2
    run.refresh_from_db()
    head = checkpointer_get().get_tuple(thread_config(run))
    assert head.metadata["lease_epoch"] == 2

    stale_id = _stale_put(run, waited, epoch=1)

    # The stale row is the newest, but the head is still the new owner's last checkpoint...
    again = checkpointer_get().get_tuple(thread_config(run))
    assert (
        again.config["configurable"]["checkpoint_id"]
        == head.config["configurable"]["checkpoint_id"]
    )
    state = graph_for(note_agent).get_state(thread_config(run))
    assert state.values["log"][-1] == "executed" and not state.interrupts
    # ...and the history is the head's lineage: the stale branch is not shown or forkable.
    assert stale_id not in [step["checkpoint_id"] for step in run_history(run=run)]
    # A redelivered advance finds the run as the new owner left it.
    assert advance.run_advance(run_id=run.id) == "nothing to do: completed"
    assert len(note_module.CALLS) == 1


def test_a_late_checkpoint_before_the_new_owner_wrote_is_a_successor_of_the_lineage(
    note_agent, alice, bob
):
    """Before the new owner writes, a late checkpoint of the old epoch is the newest of the
    highest epoch: it continues the lineage it was computed from (documented)."""
    run, waited = _waiting_run(note_agent, alice, bob)
    stale_id = _stale_put(run, waited, epoch=1)
    head = checkpointer_get().get_tuple(thread_config(run))
    assert head.config["configurable"]["checkpoint_id"] == stale_id
    assert (
        head.parent_config["configurable"]["checkpoint_id"]
        == waited.config["configurable"]["checkpoint_id"]
    )


def test_a_worker_that_cannot_be_sure_of_its_lease_writes_no_checkpoint(
    note_agent, alice, bob, settings, monkeypatch
):
    """Its heartbeat could not renew the lease (here: renewals far apart), the step outlived
    the time the lease is certainly ours: the step's result is not written, the next owner
    runs it again from the last checkpoint."""
    run, waited = _waiting_run(note_agent, alice, bob)
    settings.RUN_LEASE_SECONDS = 2  # trusted for 1.5 s after it is taken
    settings.RUN_HEARTBEAT_SECONDS = 100  # no renewal in time
    real_write = note_module.write_note

    def slow_write(args, key):
        time.sleep(1.7)
        return real_write(args, key)

    monkeypatch.setattr(note_module, "write_note", slow_write)
    assert advance.run_advance(run_id=run.id) == "stopped: lease lost"
    head = checkpointer_get().get_tuple(thread_config(run))
    # Nothing after the resume of the gate was written by the worker that was not sure.
    assert "executed" not in head.checkpoint["channel_values"].get("log", [])
    assert AgentRun.objects.get(pk=run.pk).status != AgentRun.Status.COMPLETED

    monkeypatch.setattr(note_module, "write_note", real_write)
    settings.RUN_LEASE_SECONDS = 30
    settings.RUN_HEARTBEAT_SECONDS = 10
    assert advance.run_advance(run_id=run.id) == "completed"
    assert AgentRun.objects.get(pk=run.pk).status == AgentRun.Status.COMPLETED


def test_the_head_lineage_follows_the_highest_epoch_then_the_newest():
    rows = [(1, "a", None), (1, "b", "a"), (2, "c", "b"), (1, "d", "b"), (2, "e", "c")]
    assert head_lineage(rows) == {"a", "b", "c", "e"}
    assert head_lineage([(0, "a", None), (0, "b", "a"), (0, "x", "a")]) == {"a", "x"}
    assert head_lineage([]) == set()
