"""An approval is spent once, by its own run (invariant 11): a fork never inherits a decided
gate, and the ledger refuses an approval presented by another run or for a second key."""

from __future__ import annotations

import pytest

from agents import selectors, services
from agents.effects.errors import LedgerError
from agents.effects.ledger import effect_execute
from agents.models import Effect, SandboxTicket
from agents.runtime import advance
from approvals.models import AgentRun, ApprovalRequest
from approvals.services import approval_decide
from audit.models import AuditEvent
from core.errors import ApplicationError
from tests.support.factories import RunFactory

pytestmark = pytest.mark.django_db(transaction=True)

SEV3 = {"service": "checkout", "signal": "5xx above 5%", "severity": "sev3"}


def _approved_incident(alice, bob) -> AgentRun:
    run = services.run_start(agent="incident_copilot", input=SEV3, user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    approval = run.approvals.get()
    approval_decide(
        approval=approval, user=bob, decision="approve", seen_hash=approval.payload_hash
    )
    assert advance.run_advance(run_id=run.id) == "completed"
    return run


def test_a_fork_from_after_the_approval_does_not_execute_again(alice, bob):
    run = _approved_incident(alice, bob)
    history = selectors.run_history(run=run)
    before_execute = next(step for step in history if step["next"] == ["execute"])
    children: list[AgentRun] = []
    try:
        children.append(
            services.run_fork(run=run, checkpoint_id=before_execute["checkpoint_id"], user=bob)
        )
    except ApplicationError as refused:  # ForkRefused
        assert "approval" in refused.message
    for child in children:
        advance.run_advance(run_id=child.id)
    assert SandboxTicket.objects.count() == 1
    assert Effect.objects.filter(tool="create_incident_ticket").count() == 1


def test_a_fork_from_the_pause_asks_a_person_again(alice, bob):
    run = _approved_incident(alice, bob)
    history = selectors.run_history(run=run)
    paused = next(step for step in history if step["next"] == ["human_approval"])
    child = services.run_fork(run=run, checkpoint_id=paused["checkpoint_id"], user=bob)
    assert advance.run_advance(run_id=child.id) == "waiting"
    assert child.approvals.get().status == ApprovalRequest.Status.PENDING
    assert SandboxTicket.objects.count() == 1


def _ticket_approval(alice, bob) -> tuple[AgentRun, ApprovalRequest]:
    run = services.run_start(agent="incident_copilot", input=SEV3, user=alice)
    advance.run_advance(run_id=run.id)
    approval = run.approvals.get()
    approval_decide(
        approval=approval, user=bob, decision="approve", seen_hash=approval.payload_hash
    )
    approval.refresh_from_db()
    return run, approval


def test_the_ledger_refuses_an_approval_presented_by_another_run(alice, bob):
    run, approval = _ticket_approval(alice, bob)
    other = RunFactory(agent="incident_copilot", requested_by=alice)
    with pytest.raises(LedgerError, match="belongs to run"):
        effect_execute(
            run_id=str(other.id),
            key=f"{other.thread_id}:call-1",
            tool=approval.tool,
            args=approval.args,
            approval_id=approval.id,
        )
    assert not SandboxTicket.objects.exists()
    assert AuditEvent.objects.filter(action="effect.refused", run_id=other.id).exists()


def test_the_ledger_refuses_a_second_key_for_one_approval(alice, bob):
    run, approval = _ticket_approval(alice, bob)
    first = effect_execute(
        run_id=str(run.id),
        key=f"{run.thread_id}:call-1",
        tool=approval.tool,
        args=approval.args,
        approval_id=approval.id,
    )
    replay = effect_execute(
        run_id=str(run.id),
        key=f"{run.thread_id}:call-1",
        tool=approval.tool,
        args=approval.args,
        approval_id=approval.id,
    )
    assert replay == first
    with pytest.raises(LedgerError, match="already authorized"):
        effect_execute(
            run_id=str(run.id),
            key=f"{run.thread_id}:call-2",
            tool=approval.tool,
            args=approval.args,
            approval_id=approval.id,
        )
    assert SandboxTicket.objects.count() == 1
    assert AuditEvent.objects.filter(action="effect.refused", run_id=run.id).exists()
