"""Races between workers, decisions and cancels: nothing is lost, nothing is overwritten."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from agents import tasks
from agents.effects import compensation, ledger
from agents.models import Effect
from agents.runtime import advance, lease
from agents.services import run_cancel, run_start
from approvals import services as approval_services
from approvals.models import AgentRun
from tests.support.agents import CALLS
from tests.support.factories import EffectFactory
from tests.support.queue import tasks_named

pytestmark = pytest.mark.django_db


def _advances(recorder) -> int:
    return len(tasks_named(recorder, "agents.tasks.run_advance"))


def test_a_decision_made_while_another_worker_holds_the_run_is_not_lost(
    note_agent, alice, bob, queued, django_capture_on_commit_callbacks
):
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
    advance.run_advance(run_id=run.id)
    assert lease.lease_acquire(run_id=run.id, owner="busy-worker") is not None
    approval = run.approvals.get()
    with django_capture_on_commit_callbacks(execute=True):
        approval_services.approval_decide(
            approval=approval, user=bob, decision="approve", seen_hash=approval.payload_hash
        )
    before = _advances(queued)
    # The decision's own advance finds the lease taken and does nothing...
    assert advance.run_advance(run_id=run.id).startswith("skipped")
    # ...so the busy worker's release queues the run again.
    with django_capture_on_commit_callbacks(execute=True):
        lease.lease_release(run_id=run.id, owner="busy-worker")
    assert _advances(queued) == before + 1
    assert advance.run_advance(run_id=run.id) == "completed"


def test_a_release_without_a_wake_queues_nothing(
    note_agent, alice, queued, django_capture_on_commit_callbacks
):
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
    advance.run_advance(run_id=run.id)
    before = _advances(queued)
    lease.lease_acquire(run_id=run.id, owner="w")
    with django_capture_on_commit_callbacks(execute=True):
        lease.lease_release(run_id=run.id, owner="w")
    assert _advances(queued) == before


def test_a_cancel_landing_while_the_worker_runs_is_not_overwritten(
    note_agent, alice, bob, monkeypatch
):
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
    advance.run_advance(run_id=run.id)
    approval = run.approvals.get()
    approval_services.approval_decide(
        approval=approval, user=bob, decision="approve", seen_hash=approval.payload_hash
    )
    original = approval_services.run_mark_running

    def cancel_first(**kwargs):
        run_cancel(run=AgentRun.objects.get(pk=run.pk), user=alice)
        return original(**kwargs)

    monkeypatch.setattr(approval_services, "run_mark_running", cancel_first)
    assert advance.run_advance(run_id=run.id).startswith("cancelled")
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert CALLS == []


def test_no_approval_is_created_for_a_cancelled_run(note_agent, alice, monkeypatch):
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
    original = approval_services.approval_requests_sync

    def cancel_first(**kwargs):
        run_cancel(run=AgentRun.objects.get(pk=run.pk), user=alice)
        return original(**kwargs)

    monkeypatch.setattr(approval_services, "approval_requests_sync", cancel_first)
    advance.run_advance(run_id=run.id)
    assert not run.approvals.exists()
    assert AgentRun.objects.get(pk=run.pk).status == "cancelled"


def test_recovery_requeues_a_running_run_without_a_lease(note_agent, alice, queued, settings):
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
    long_ago = timezone.now() - dt.timedelta(seconds=settings.Q_RETRY + 5)
    AgentRun.objects.filter(pk=run.pk).update(
        status="running",
        lease_owner="",
        lease_expires_at=None,
        updated_at=long_ago,
        wake_requested=False,
    )
    assert tasks.runs_recover() == 1


def test_recovery_requeues_a_woken_run_whose_task_never_ran(note_agent, alice, queued, settings):
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
    advance.run_advance(run_id=run.id)
    long_ago = timezone.now() - dt.timedelta(seconds=settings.Q_RETRY + 5)
    AgentRun.objects.filter(pk=run.pk).update(wake_requested=True, updated_at=long_ago)
    assert tasks.runs_recover() == 1
    AgentRun.objects.filter(pk=run.pk).update(wake_requested=False)
    assert tasks.runs_recover() == 0


def test_the_ledger_refuses_downstream_calls_without_the_lease(
    note_agent, alice, make_effect_tool, monkeypatch
):
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
    monkeypatch.setattr(ledger, "_lease_owner", lambda: "a-worker-that-lost-it")
    with pytest.raises(ledger.LeaseNotHeld):
        ledger.effect_execute(
            run_id=str(run.id), key=f"{run.id}:x", tool="fenced_write", args={"text": "a"}
        )
    assert make_effect_tool == []
    lease.lease_acquire(run_id=run.id, owner="a-worker-that-lost-it")
    ledger.effect_execute(
        run_id=str(run.id), key=f"{run.id}:x", tool="fenced_write", args={"text": "a"}
    )
    assert len(make_effect_tool) == 1


def test_cancel_settles_a_claimed_effect_by_key_then_compensates_it(
    alice, make_effect_tool, note_agent
):
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
    EffectFactory(key=f"{run.id}:half", run=run, tool="fenced_write", args={"text": "a"})
    make_effect_tool.downstream_has.add(f"{run.id}:half")  # the killed call did reach it
    undone = compensation.run_compensate(run_id=str(run.id))
    assert [e.key for e in undone] == [f"{run.id}:half:compensate"]
    assert Effect.objects.get(key=f"{run.id}:half").status == "compensated"
    # Compensation asked the downstream and undid it; it never called the write itself.
    assert [name for name, _ in make_effect_tool] == ["erase"]


def test_cancel_never_performs_the_first_call_of_a_claimed_effect(
    alice, make_effect_tool, note_agent, settings
):
    settings.EFFECT_SETTLE_AFTER_SECONDS = 0  # the claiming worker died long ago
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
    EffectFactory(key=f"{run.id}:half", run=run, tool="fenced_write", args={"text": "a"})
    undone = compensation.run_compensate(run_id=str(run.id))
    # The downstream never saw the key: nothing happened, nothing to undo, nothing called.
    assert undone == []
    assert Effect.objects.get(key=f"{run.id}:half").status == "failed"
    assert list(make_effect_tool) == []


@pytest.fixture
def make_effect_tool():
    from pydantic import BaseModel

    from agents.tools import ToolSpec, tool_register

    class Calls(list):
        downstream_has: set[str]

    calls = Calls()
    calls.downstream_has = set()

    class TextArgs(BaseModel):
        text: str

    def write(args, key):
        calls.append(("write", key))
        return {"ok": True}

    def erase(args, key):
        calls.append(("erase", key))
        return {"ok": True}

    tool_register(
        ToolSpec(
            name="fenced_write",
            description="w",
            args_model=TextArgs,
            tier="write",
            run=write,
            compensate_with="fenced_erase",
            lookup=lambda key: {"ok": True} if key in calls.downstream_has else None,
        )
    )
    tool_register(
        ToolSpec(name="fenced_erase", description="e", args_model=TextArgs, tier="write", run=erase)
    )
    return calls
