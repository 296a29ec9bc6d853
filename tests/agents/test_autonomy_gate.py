"""Graduated autonomy at the gate: a sampled or post-hoc rule lets a gated call run without
waiting, recorded once per idempotency key; anything else waits for a person."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any, TypedDict

import pytest
from django.utils import timezone
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from agents import tasks
from agents.autonomy_undo import action_effects
from agents.graphs.incident_copilot.graph import build as incident_build
from agents.hitl.gate import approval_gate, gate_payload
from agents.models import Effect, SandboxDeploy
from agents.sandbox import systems as sandbox
from approvals.autonomy import sample_draw
from approvals.autonomy_models import AutonomousAction, AutonomyRule
from approvals.models import AgentRun, ApprovalRequest
from audit.models import AuditEvent
from tests.support.factories import RunFactory
from tests.support.people import client_for

pytestmark = pytest.mark.django_db(transaction=True)

TICKET_ARGS = {"service": "checkout", "title": "5xx", "severity": "sev3", "body": "errors"}


class GateState(TypedDict, total=False):
    key: str | None
    confidence: float | None
    tool: str
    args: dict[str, Any]
    decision: dict[str, Any]


def _gate_node(state: GateState) -> dict[str, Any]:
    return {
        "decision": approval_gate(
            tool=state.get("tool", "create_incident_ticket"),
            args=state.get("args", TICKET_ARGS),
            rationale="the errors started an hour ago",
            requested_at="2026-01-01T00:00:00+00:00",
            key=state.get("key"),
            confidence=state.get("confidence"),
        )
    }


def gate_graph():
    builder = StateGraph(GateState)
    builder.add_node("gate", _gate_node)
    builder.add_edge(START, "gate")
    builder.add_edge("gate", END)
    return builder.compile(checkpointer=InMemorySaver())


@pytest.fixture
def run(alice) -> AgentRun:
    return RunFactory(agent="incident_copilot", requested_by=alice)


def ask(run: AgentRun, graph=None, *, thread: str | None = None, **state: Any):
    """Invoke the gate once; (decision or None, pending interrupts)."""
    graph = graph or gate_graph()
    config = {"configurable": {"thread_id": thread or run.thread_id}}
    out = graph.invoke({"key": f"{run.thread_id}:call-1", **state}, config, durability="sync")
    return out.get("decision"), graph.get_state(config).interrupts


def rule(**fields: Any) -> AutonomyRule:
    return AutonomyRule.objects.create(tool="create_incident_ticket", **fields)


def ran_events() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action="autonomy.ran"))


def test_a_sampled_rule_at_zero_percent_runs_the_call_without_queueing_it(run):
    rule(mode="sampled", sample_percent=0)
    decision, interrupts = ask(run)
    assert interrupts == ()
    assert decision["decision"] == "approve"
    assert decision["by"] == "policy:sampled"
    assert decision["approval_id"] is None
    action = AutonomousAction.objects.get()
    assert decision["autonomous_action_id"] == action.pk
    assert action.review == AutonomousAction.Review.NOT_SAMPLED
    assert action.args == TICKET_ARGS
    assert not ApprovalRequest.objects.exists()


def test_a_sampled_rule_at_a_hundred_percent_queues_the_call_for_review(run):
    rule(mode="sampled", sample_percent=100)
    decision, _ = ask(run)
    action = AutonomousAction.objects.get()
    assert action.review == AutonomousAction.Review.PENDING
    [event] = ran_events()
    assert event.data["sampled"] is True
    assert event.data["mode"] == "sampled"
    assert event.data["sample_percent"] == 100
    assert event.data["rule_id"] == AutonomyRule.objects.get().pk


def test_the_draw_is_reproducible_from_the_key_alone(run):
    rule(mode="sampled", sample_percent=37)
    ask(run)
    action = AutonomousAction.objects.get()
    assert action.draw == sample_draw(f"{run.thread_id}:call-1")
    [event] = ran_events()
    assert event.data["draw"] == action.draw
    sampled = action.draw < 37 * 100
    assert (action.review == AutonomousAction.Review.PENDING) is sampled


def test_the_recorded_payload_is_what_a_reviewer_would_have_seen(run):
    rule(mode="post_hoc")
    ask(run)
    action = AutonomousAction.objects.get()
    expected = gate_payload(
        thread_id=run.thread_id,
        tool="create_incident_ticket",
        args=TICKET_ARGS,
        rationale="the errors started an hour ago",
        evidence=[],
        tier="write",
        requested_at="2026-01-01T00:00:00+00:00",
    )
    assert action.payload == expected
    assert action.review == AutonomousAction.Review.PENDING


def test_a_confidence_below_the_threshold_asks_a_person_and_shows_the_confidence(run):
    rule(mode="post_hoc", confidence_below=Decimal("0.8"))
    decision, [interrupt] = ask(run, confidence=0.55)
    assert decision is None
    assert interrupt.value["confidence"] == 0.55
    assert not AutonomousAction.objects.exists()


def test_a_confidence_at_the_threshold_runs_and_is_recorded(run):
    rule(mode="post_hoc", confidence_below=Decimal("0.8"))
    decision, _ = ask(run, confidence=0.8)
    assert decision["by"] == "policy:post_hoc"
    action = AutonomousAction.objects.get()
    assert action.confidence == Decimal("0.800")
    assert action.payload["confidence"] == 0.8


def test_without_a_stated_confidence_the_payload_is_unchanged(run):
    _, [interrupt] = ask(run)
    assert "confidence" not in interrupt.value


def test_a_call_without_a_key_asks_a_person(run):
    rule(mode="post_hoc")
    decision, [interrupt] = ask(run, key=None)
    assert decision is None
    assert not AutonomousAction.objects.exists()


def test_a_rule_for_a_tool_nobody_can_undo_still_asks_a_person(run):
    AutonomyRule.objects.create(tool="notify_customer", mode="post_hoc")
    args = {"order_id": "A-1", "recipient": "c@example.com", "message": "hello"}
    decision, [interrupt] = ask(run, tool="notify_customer", args=args)
    assert decision is None
    assert not AutonomousAction.objects.exists()


def test_a_change_of_the_rule_to_ask_takes_effect_at_once(run):
    autonomy = rule(mode="post_hoc")
    decision, _ = ask(run, key=f"{run.thread_id}:first")
    assert decision["by"] == "policy:post_hoc"
    autonomy.mode = AutonomyRule.Mode.ASK
    autonomy.save()
    decision, [interrupt] = ask(run, key=f"{run.thread_id}:second", thread="other-thread")
    assert decision is None
    assert AutonomousAction.objects.count() == 1


def test_a_replay_under_the_same_key_records_nothing_twice(run):
    rule(mode="sampled", sample_percent=50)
    first, _ = ask(run)
    second, _ = ask(run, thread="replayed-thread")
    assert first == second
    assert AutonomousAction.objects.count() == 1
    assert len(ran_events()) == 1


def test_a_recorded_call_replays_as_recorded_after_the_rule_changed(run):
    autonomy = rule(mode="post_hoc")
    first, _ = ask(run)
    autonomy.delete()
    again, interrupts = ask(run, thread="replayed-thread")
    assert again == first
    assert interrupts == ()


def test_a_person_s_answer_stands_when_a_rule_arrives_while_it_waits(run):
    graph = gate_graph()
    _, [interrupt] = ask(run, graph)
    rule(mode="post_hoc")
    config = {"configurable": {"thread_id": run.thread_id}}
    answer = {"decision": "reject", "message": "no", "by": "bob", "approval_id": 7, "args": {}}
    out = graph.invoke(Command(resume={interrupt.id: answer}), config, durability="sync")
    assert out["decision"]["decision"] == "reject"
    assert not AutonomousAction.objects.exists()


def _two_gates_node(state: GateState) -> dict[str, Any]:
    first = approval_gate(
        tool="create_incident_ticket",
        args=TICKET_ARGS,
        rationale="a ticket",
        requested_at="2026-01-01T00:00:00+00:00",
        key=f"{state['key']}:ticket",
    )
    second = approval_gate(
        tool="rollback_deploy",
        args={"service": "checkout", "from_version": "v42", "to_version": "v41"},
        rationale="a rollback",
        requested_at="2026-01-01T00:00:00+00:00",
        key=f"{state['key']}:rollback",
    )
    return {"decision": {"first": first, "second": second}}


def test_a_person_s_answer_to_the_second_gate_of_a_node_is_not_taken_by_the_first(run):
    rule(mode="post_hoc")
    builder = StateGraph(GateState)
    builder.add_node("gates", _two_gates_node)
    builder.add_edge(START, "gates")
    builder.add_edge("gates", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": run.thread_id}}
    graph.invoke({"key": run.thread_id}, config, durability="sync")
    [interrupt] = graph.get_state(config).interrupts
    assert interrupt.value["tool"] == "rollback_deploy"

    answer = {"decision": "reject", "message": "no", "by": "carol", "approval_id": 9, "args": {}}
    out = graph.invoke(Command(resume={interrupt.id: answer}), config, durability="sync")
    assert out["decision"]["first"]["by"] == "policy:post_hoc"
    assert out["decision"]["second"]["decision"] == "reject"
    assert AutonomousAction.objects.count() == 1


# --- the incident copilot, end to end: run without waiting, then undo --------------------------


def _recent_deploy() -> None:
    sandbox.deploy_record(
        service="checkout",
        version="v42",
        previous_version="v41",
        deployed_at=timezone.now() - dt.timedelta(minutes=20),
    )


def test_the_incident_copilot_runs_a_post_hoc_rollback_and_links_its_effect(run):
    _recent_deploy()
    AutonomyRule.objects.create(tool="rollback_deploy", mode="post_hoc")
    graph = incident_build(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": run.thread_id}}
    incident = {"service": "checkout", "signal": "5xx", "severity": "sev1"}
    graph.invoke(incident, config, durability="sync")
    assert graph.get_state(config).interrupts == ()
    action = AutonomousAction.objects.get()
    assert action.tool == "rollback_deploy"
    [effect] = action_effects(key=action.key, tool=action.tool)
    assert effect.tool == "rollback_deploy"
    assert effect.approval_id is None
    assert effect.status == Effect.Status.SUCCEEDED


def test_an_undo_delivered_twice_compensates_exactly_once(run):
    _recent_deploy()
    AutonomyRule.objects.create(tool="rollback_deploy", mode="post_hoc")
    graph = incident_build(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": run.thread_id}}
    graph.invoke({"service": "checkout", "signal": "5xx", "severity": "sev1"}, config)
    action = AutonomousAction.objects.get()
    AutonomousAction.objects.filter(pk=action.pk).update(review="undoing")

    assert tasks.autonomous_action_undo(action.pk) == "undone"
    assert tasks.autonomous_action_undo(action.pk) == "not undoing"

    compensations = SandboxDeploy.objects.filter(idempotency_key__endswith=":compensate")
    assert compensations.count() == 1
    assert compensations.get().version == "v42"
    [effect] = action_effects(key=action.key, tool=action.tool)
    assert effect.status == Effect.Status.COMPENSATED
    action.refresh_from_db()
    assert action.review == AutonomousAction.Review.UNDONE
    [event] = AuditEvent.objects.filter(action="autonomy.undone")
    assert event.data["compensations"] == [f"{action.key}:compensate"]


def test_an_undo_whose_compensation_fails_ends_undo_failed_for_a_person(run):
    _recent_deploy()
    AutonomyRule.objects.create(tool="rollback_deploy", mode="post_hoc")
    graph = incident_build(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": run.thread_id}}
    graph.invoke({"service": "checkout", "signal": "5xx", "severity": "sev1"}, config)
    action = AutonomousAction.objects.get()
    # Someone deployed again since: rolling forward from v41 is refused by the deploy system.
    sandbox.deploy_record(service="checkout", version="v43", previous_version="v41")
    AutonomousAction.objects.filter(pk=action.pk).update(review="undoing")

    assert tasks.autonomous_action_undo(action.pk) == "undo_failed"
    action.refresh_from_db()
    assert action.review == AutonomousAction.Review.UNDO_FAILED
    [event] = AuditEvent.objects.filter(action="autonomy.undo_failed")
    assert event.data["failed"] == [action.key]


def test_the_run_page_shows_the_action_and_the_compensation_that_undid_it(run, alice):
    _recent_deploy()
    AutonomyRule.objects.create(tool="rollback_deploy", mode="post_hoc")
    graph = incident_build(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": run.thread_id}}
    graph.invoke({"service": "checkout", "signal": "5xx", "severity": "sev1"}, config)
    action = AutonomousAction.objects.get()
    AutonomousAction.objects.filter(pk=action.pk).update(review="undoing")
    tasks.autonomous_action_undo(action.pk)

    html = client_for(alice).get(f"/runs/{run.pk}/").content.decode()
    assert "Ran without waiting" in html
    assert f'data-autonomous-action="{action.pk}"' in html
    assert "Post Hoc" in html
    assert f"undone by <code>{action.key}:compensate</code>" in html


def test_an_undo_runs_while_another_worker_holds_the_run_s_lease(run):
    _recent_deploy()
    AutonomyRule.objects.create(tool="rollback_deploy", mode="post_hoc")
    graph = incident_build(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": run.thread_id}}
    graph.invoke({"service": "checkout", "signal": "5xx", "severity": "sev1"}, config)
    AgentRun.objects.filter(pk=run.pk).update(
        status="running",
        lease_owner="another-worker",
        lease_expires_at=timezone.now() + dt.timedelta(minutes=5),
    )
    action = AutonomousAction.objects.get()
    AutonomousAction.objects.filter(pk=action.pk).update(review="undoing")

    assert tasks.autonomous_action_undo(action.pk) == "undone"
    assert SandboxDeploy.objects.filter(idempotency_key__endswith=":compensate").count() == 1


def test_an_undo_of_an_erased_run_s_action_fails_for_a_person_without_calling_anything(run):
    _recent_deploy()
    AutonomyRule.objects.create(tool="rollback_deploy", mode="post_hoc")
    graph = incident_build(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": run.thread_id}}
    graph.invoke({"service": "checkout", "signal": "5xx", "severity": "sev1"}, config)
    AgentRun.objects.filter(pk=run.pk).update(erased_at=timezone.now())
    action = AutonomousAction.objects.get()
    AutonomousAction.objects.filter(pk=action.pk).update(review="undoing")

    assert tasks.autonomous_action_undo(action.pk) == "undo_failed"
    assert not SandboxDeploy.objects.filter(idempotency_key__endswith=":compensate").exists()
    [event] = AuditEvent.objects.filter(action="autonomy.undo_failed")
    assert event.data["reason"] == "the run's data was erased"
