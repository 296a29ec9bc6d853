"""Attack: an undo asked after the gate let a call run but before its effect ran."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from langgraph.checkpoint.memory import InMemorySaver

from agents import tasks
from agents.autonomy_undo import action_effects
from agents.graphs.incident_copilot.graph import build as incident_build
from agents.models import Effect, SandboxDeploy
from agents.sandbox import systems as sandbox
from approvals.autonomy_models import AutonomousAction, AutonomyRule
from approvals.services.autonomy_review import autonomous_action_review
from tests.support.factories import RunFactory

pytestmark = pytest.mark.django_db(transaction=True)

INCIDENT = {"service": "checkout", "signal": "5xx", "severity": "sev1"}


def _recent_deploy() -> None:
    sandbox.deploy_record(
        service="checkout",
        version="v42",
        previous_version="v41",
        deployed_at=timezone.now() - dt.timedelta(minutes=20),
    )


def test_an_undo_done_before_the_effect_ran_does_not_let_the_effect_run_afterwards(alice, bob):
    run = RunFactory(agent="incident_copilot", requested_by=alice, status="running")
    _recent_deploy()
    AutonomyRule.objects.create(tool="rollback_deploy", mode="post_hoc")
    graph = incident_build(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": run.thread_id}}
    # The worker stops between the gate (human_approval) and the effect (execute): a deploy,
    # a kill, a lost lease. The action is recorded and waits in the after-the-fact queue.
    graph.invoke(INCIDENT, config, durability="sync", interrupt_after=["human_approval"])
    action = AutonomousAction.objects.get()
    assert not action_effects(key=action.key, tool=action.tool).exists()

    # bob undoes it; the undo task finds nothing to compensate yet and closes the undo.
    autonomous_action_review(action=action, user=bob, verdict="undo")
    assert tasks.autonomous_action_undo(action.pk) == "undone"
    action.refresh_from_db()

    # The run resumes: execute replays the gate's decision and rolls back anyway.
    graph.invoke(None, config, durability="sync")
    rollbacks = SandboxDeploy.objects.exclude(idempotency_key__endswith=":compensate").filter(
        idempotency_key=action.key
    )
    effects = action_effects(key=action.key, tool=action.tool)
    uncompensated = effects.filter(status=Effect.Status.SUCCEEDED)
    assert action.review == AutonomousAction.Review.UNDONE
    assert not uncompensated.exists(), (
        f"action is {action.review} yet its effect ran afterwards and stands "
        f"({rollbacks.count()} rollback(s) in the deploy system, no compensation)"
    )


def test_the_refused_effect_is_audited_and_the_copilot_reports_it_undone(alice, bob):
    from audit.models import AuditEvent

    run = RunFactory(agent="incident_copilot", requested_by=alice, status="running")
    _recent_deploy()
    AutonomyRule.objects.create(tool="rollback_deploy", mode="post_hoc")
    graph = incident_build(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": run.thread_id}}
    graph.invoke(INCIDENT, config, durability="sync", interrupt_after=["human_approval"])
    action = AutonomousAction.objects.get()
    autonomous_action_review(action=action, user=bob, verdict="undo")
    tasks.autonomous_action_undo(action.pk)
    result = graph.invoke(None, config, durability="sync")
    assert result["outcome"]["status"] == "undone"
    assert "undone on review before it ran" in result["summary"]
    assert not SandboxDeploy.objects.filter(idempotency_key=action.key).exists()
    refused = AuditEvent.objects.filter(action="effect.refused").values_list("data", flat=True)
    assert [d["reason"] for d in refused] == ["undone by review before it ran"]
    finished = AuditEvent.objects.get(action="autonomy.undone")
    assert finished.data["prevented"] is True
