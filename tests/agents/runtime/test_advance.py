from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from agents import selectors as agent_selectors
from agents import services as agent_services
from agents.runtime import advance, failures
from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from agents.selectors import run_interrupts_without_approval
from agents.services import run_start
from approvals.changes import approval_changes, changes_digest
from approvals.models import AgentRun, ApprovalRequest
from approvals.services import approval_decide
from audit.models import AuditEvent
from tests.support.agents import CALLS, build_note_graph

pytestmark = pytest.mark.django_db


def _start(alice, topic="disk"):
    return run_start(agent="note_agent", input={"topic": topic}, user=alice)


def _decide(run, user, decision="approve", **kw):
    approval = run.approvals.get()
    # A deploy between the request and the decision is a change the reviewer confirms.
    seen = changes_digest(approval_changes(approval)) or None
    return approval_decide(
        approval=approval,
        user=user,
        decision=decision,
        seen_hash=approval.payload_hash,
        changes_seen=seen,
        **kw,
    )


def test_first_advance_pauses_with_one_approval(note_agent, alice):
    run = _start(alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    run.refresh_from_db()
    assert run.status == "waiting"
    approval = run.approvals.get()
    assert approval.tool == "write_note"
    assert approval.payload["blast_radius"] == "one note about about disk"
    assert approval.payload["evidence"] == ["e1"]
    assert approval.payload_hash and approval.status == "pending"
    assert (
        AuditEvent.objects.filter(action="approval.requested", approval_id=approval.id).count() == 1
    )
    assert CALLS == []


def test_repeated_advance_of_a_paused_run_creates_nothing(note_agent, alice):
    run = _start(alice)
    advance.run_advance(run_id=run.id)
    assert advance.run_advance(run_id=run.id) == "waiting"
    assert advance.run_advance(run_id=run.id) == "waiting"
    assert ApprovalRequest.objects.filter(run=run).count() == 1
    assert AuditEvent.objects.filter(action="approval.requested").count() == 1


def test_approve_resumes_and_executes_once(note_agent, alice, bob):
    run = _start(alice)
    advance.run_advance(run_id=run.id)
    _decide(run, bob)
    assert advance.run_advance(run_id=run.id) == "completed"
    assert advance.run_advance(run_id=run.id) == "nothing to do: completed"
    run.refresh_from_db()
    assert run.status == "completed" and run.resume_count == 1
    assert len(CALLS) == 1
    assert run.output["log"] == ["propose", "approve", "executed"]


def test_edit_executes_the_edited_args(note_agent, alice, bob):
    run = _start(alice)
    advance.run_advance(run_id=run.id)
    _decide(run, bob, decision="edit", args={"text": "edited", "count": 2})
    advance.run_advance(run_id=run.id)
    assert CALLS[0]["args"] == {"text": "edited", "count": 2}


def test_reject_never_executes(note_agent, alice, bob):
    run = _start(alice)
    advance.run_advance(run_id=run.id)
    _decide(run, bob, decision="reject", message="no")
    assert advance.run_advance(run_id=run.id) == "completed"
    assert CALLS == []
    run.refresh_from_db()
    assert run.output["log"][-1] == "skipped:reject"


def test_a_live_lease_held_elsewhere_skips_the_advance(note_agent, alice):
    run = _start(alice)
    AgentRun.objects.filter(pk=run.pk).update(
        lease_owner="other-worker", lease_expires_at=timezone.now() + dt.timedelta(seconds=30)
    )
    assert advance.run_advance(run_id=run.id).startswith("skipped")
    assert not ApprovalRequest.objects.filter(run=run).exists()


def test_an_expired_lease_is_taken_over(note_agent, alice):
    run = _start(alice)
    AgentRun.objects.filter(pk=run.pk).update(
        lease_owner="dead-worker", lease_expires_at=timezone.now() - dt.timedelta(seconds=1)
    )
    assert advance.run_advance(run_id=run.id) == "waiting"


def test_drain_resumes_on_the_checkpointed_version(note_agent, alice, bob):
    run = _start(alice)
    advance.run_advance(run_id=run.id)
    used: list[str] = []

    def v2_factory(*, checkpointer):
        used.append("v2")
        return build_note_graph(checkpointer=checkpointer)

    agent_register(AgentSpec(name="note_agent", version="2", factory=v2_factory, policy="drain"))
    _decide(run, bob)
    assert advance.run_advance(run_id=run.id) == "completed"
    assert used == []  # v1 stayed registered and ran the thread
    assert len(CALLS) == 1


def test_migrate_transforms_the_state_and_resumes_under_v2(note_agent, alice, bob):
    run = _start(alice)
    advance.run_advance(run_id=run.id)
    agent_register(
        AgentSpec(
            name="note_agent",
            version="2",
            factory=build_note_graph,
            policy="migrate",
            migrate=lambda values, from_version: {"log": [f"migrated-from-v{from_version}"]},
        )
    )
    agent_unregister("note_agent", "1")
    _decide(run, bob)
    assert advance.run_advance(run_id=run.id) == "completed"
    run.refresh_from_db()
    assert run.graph_version == "2"
    assert "migrated-from-v1" in run.output["log"]
    assert AuditEvent.objects.filter(action="run.migrated", run_id=run.id).exists()


def test_removed_pending_node_is_flagged_not_finished(note_agent, alice, bob):
    run = _start(alice)
    advance.run_advance(run_id=run.id)

    def v2_without_approve(*, checkpointer):
        from langgraph.graph import END, START, StateGraph

        from tests.support.agents import NoteState, note_propose

        builder = StateGraph(NoteState)
        builder.add_node("propose", note_propose)
        builder.add_edge(START, "propose")
        builder.add_edge("propose", END)
        return builder.compile(checkpointer=checkpointer)

    agent_register(
        AgentSpec(
            name="note_agent",
            version="2",
            factory=v2_without_approve,
            policy="migrate",
            migrate=lambda values, v: {},
        )
    )
    agent_unregister("note_agent", "1")
    _decide(run, bob)
    assert advance.run_advance(run_id=run.id).startswith("flagged")
    run.refresh_from_db()
    assert "approve" in run.flag and run.status != "completed"
    assert CALLS == []


def test_unregistered_old_version_without_migration_is_flagged(note_agent, alice, bob):
    run = _start(alice)
    advance.run_advance(run_id=run.id)
    agent_register(AgentSpec(name="note_agent", version="2", factory=build_note_graph))
    agent_unregister("note_agent", "1")
    _decide(run, bob)
    assert advance.run_advance(run_id=run.id).startswith("flagged")
    run.refresh_from_db()
    assert "no longer registered" in run.flag


def test_budget_is_enforced_across_resumes(note_agent, alice, bob, settings):
    settings.RUN_MAX_STEPS = 2
    run = _start(alice)
    advance.run_advance(run_id=run.id)  # propose (+ approve paused) -> 1 step
    _decide(run, bob)
    outcome = advance.run_advance(run_id=run.id)
    run.refresh_from_db()
    assert run.steps_used == 3
    assert outcome.startswith("failed") and run.status == "failed"
    assert "budget" in run.error


def test_retryable_error_is_retried_then_dead(note_agent, alice, settings, monkeypatch):
    settings.RUN_MAX_FAILURES = 2
    run = _start(alice)

    def boom(*args, **kwargs):
        raise TimeoutError("model timed out")

    monkeypatch.setattr(advance, "_advance", boom)
    monkeypatch.setattr(failures, "_enqueue_later", lambda run_id, delay: None)
    assert advance.run_advance(run_id=run.id).startswith("retrying")
    run.refresh_from_db()
    assert run.status == "queued" and run.failure_count == 1
    assert advance.run_advance(run_id=run.id).startswith("dead")
    run.refresh_from_db()
    assert run.status == "dead" and "model timed out" in run.error
    assert AuditEvent.objects.filter(action="run.escalated", run_id=run.id).exists()


def test_non_retryable_error_is_dead_at_once(note_agent, alice, monkeypatch):
    run = _start(alice)

    def bad(*args, **kwargs):
        raise ValueError("schema mismatch")

    monkeypatch.setattr(advance, "_advance", bad)
    assert advance.run_advance(run_id=run.id).startswith("dead")


def test_history_lists_steps_with_changes(note_agent, alice, bob):
    run = _start(alice)
    advance.run_advance(run_id=run.id)
    _decide(run, bob)
    advance.run_advance(run_id=run.id)
    history = agent_selectors.run_history(run=run)
    assert history[0]["nodes"] == ["input"]
    assert any(step["nodes"] == ["execute"] for step in history)
    last = history[-1]
    assert last["changed"]["log"][-1] == "executed"
    paused = [step for step in history if step["interrupt_ids"]]
    assert [iid for step in paused for iid in step["interrupt_ids"]] == [
        run.approvals.get().interrupt_id
    ]
    assert run_interrupts_without_approval(run=run) == []


def test_fork_from_the_paused_step_starts_a_new_branch(note_agent, alice, bob):
    run = _start(alice)
    advance.run_advance(run_id=run.id)
    history = agent_selectors.run_history(run=run)
    paused = next(step for step in history if step["next"] == ["approve"])
    child = agent_services.run_fork(run=run, checkpoint_id=paused["checkpoint_id"], user=bob)
    assert advance.run_advance(run_id=child.id) == "waiting"
    assert child.approvals.count() == 1
    assert AuditEvent.objects.filter(action="run.forked", run_id=child.id).exists()


def test_a_waiting_run_is_migrated_once_however_often_it_is_advanced(note_agent, alice, bob):
    run = _start(alice)
    advance.run_advance(run_id=run.id)
    calls: list[str] = []

    def migrate(values: dict, from_version: str) -> dict:
        calls.append(from_version)
        return {"log": [f"migrated-from-v{from_version}"]}

    agent_register(
        AgentSpec(
            name="note_agent",
            version="2",
            factory=build_note_graph,
            policy="migrate",
            migrate=migrate,
        )
    )
    agent_unregister("note_agent", "1")
    assert advance.run_advance(run_id=run.id) == "waiting"
    assert advance.run_advance(run_id=run.id) == "waiting"
    _decide(run, bob)
    assert advance.run_advance(run_id=run.id) == "completed"
    assert advance.run_advance(run_id=run.id) == "nothing to do: completed"
    run.refresh_from_db()
    assert calls == ["1"]
    assert AuditEvent.objects.filter(action="run.migrated", run_id=run.id).count() == 1
    assert run.output["log"].count("migrated-from-v1") == 1
