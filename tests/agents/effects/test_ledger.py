"""The effects ledger: claim, dedupe, conflict, completion after a crash, approved args,
retries and compensation (invariants 1, 5 and 9)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from pydantic import BaseModel

from agents.effects import ledger
from agents.effects.compensation import effect_compensate, run_compensate
from agents.effects.errors import (
    CompensationFailed,
    EffectArgsMismatch,
    EffectConflict,
    RetryableToolError,
    ToolError,
)
from agents.effects.ledger import effect_execute
from agents.models import Effect, SandboxTicket
from agents.sandbox import systems as sandbox
from agents.tools import ToolSpec, tool_register, tool_unregister
from approvals.models import AgentRun, ApprovalRequest
from audit.canonical import payload_hash
from audit.models import AuditEvent
from audit.private import event_data_open
from tests.support.factories import ApprovalFactory, EffectFactory, RunFactory

pytestmark = pytest.mark.django_db(transaction=True)

TICKET = {"service": "checkout", "title": "checkout 5xx", "severity": "sev3", "body": ""}


class EchoArgs(BaseModel):
    text: str


class Downstream:
    """A test tool whose answers are scripted: an exception to raise, or a result."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], str | None]] = []
        self.script: list[Any] = []
        self.delay = 0.0

    def __call__(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        self.calls.append((args, key))
        if self.delay:
            delay, self.delay = self.delay, 0.0
            time.sleep(delay)
        step = self.script.pop(0) if self.script else None
        if isinstance(step, Exception):
            raise step
        return {"echo": args["text"], "call": len(self.calls)}


@pytest.fixture
def downstream():
    fake = Downstream()
    tool_register(
        ToolSpec(name="echo_test", description="echo", args_model=EchoArgs, tier="write", run=fake)
    )
    yield fake
    tool_unregister("echo_test")


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)


@pytest.fixture
def run(alice) -> AgentRun:
    return RunFactory(agent="incident_copilot", requested_by=alice)


def actions(run: AgentRun) -> list[str]:
    return list(
        AuditEvent.objects.filter(run_id=run.pk).order_by("seq").values_list("action", flat=True)
    )


def test_first_call_claims_runs_and_records_the_result(run):
    result = effect_execute(
        run_id=run.thread_id, key=f"{run.thread_id}:c1", tool="create_incident_ticket", args=TICKET
    )
    effect = Effect.objects.get()
    assert effect.status == Effect.Status.SUCCEEDED
    assert effect.result == result
    assert effect.args_fingerprint == payload_hash(TICKET)
    assert effect.attempts == 1
    assert SandboxTicket.objects.get().idempotency_key == effect.key
    assert actions(run) == ["effect.claimed", "effect.succeeded"]
    succeeded = AuditEvent.objects.get(action="effect.succeeded")
    assert succeeded.data["key"] == effect.key
    assert succeeded.data["tool"] == "create_incident_ticket"
    opened = event_data_open(succeeded)  # args and result are sealed under the run's key
    assert opened["args"] == TICKET
    assert opened["result"] == result
    assert succeeded.data["approval_id"] is None


def test_same_key_and_args_returns_the_stored_result_without_calling_downstream(run, downstream):
    first = effect_execute(run_id=run.thread_id, key="k", tool="echo_test", args={"text": "hi"})
    second = effect_execute(run_id=run.thread_id, key="k", tool="echo_test", args={"text": "hi"})
    assert second == first
    assert len(downstream.calls) == 1
    assert Effect.objects.count() == 1


def test_same_key_with_other_args_is_a_conflict(run, downstream):
    effect_execute(run_id=run.thread_id, key="k", tool="echo_test", args={"text": "hi"})
    with pytest.raises(EffectConflict):
        effect_execute(run_id=run.thread_id, key="k", tool="echo_test", args={"text": "bye"})
    assert len(downstream.calls) == 1


def test_claimed_but_unfinished_effect_is_completed_with_the_same_key(run):
    """The worker died after the ticket was created and before the ledger recorded it."""
    key = f"{run.thread_id}:crashed"
    EffectFactory(key=key, run=run, tool="create_incident_ticket", args=TICKET)  # claimed
    created = sandbox.ticket_create(key=key, **TICKET)
    result = effect_execute(
        run_id=run.thread_id, key=key, tool="create_incident_ticket", args=TICKET
    )
    assert result == created
    assert SandboxTicket.objects.count() == 1
    effect = Effect.objects.get(key=key)
    assert (effect.status, effect.result) == (Effect.Status.SUCCEEDED, created)


def _approval(run: AgentRun, *, args: dict, decision: dict, status: str) -> ApprovalRequest:
    return ApprovalFactory(
        run=run,
        interrupt_id="i1",
        tool="create_incident_ticket",
        args=args,
        tier="write",
        status=status,
        decision=decision,
    )


def test_args_that_differ_from_the_approved_args_are_refused_before_anything_runs(run):
    approval = _approval(
        run, args=TICKET, decision={"decision": "approve", "by": "bob"}, status="approved"
    )
    with pytest.raises(EffectArgsMismatch):
        effect_execute(
            run_id=run.thread_id,
            key="k",
            tool="create_incident_ticket",
            args={**TICKET, "severity": "sev1"},
            approval_id=approval.pk,
        )
    assert not Effect.objects.exists()
    assert not SandboxTicket.objects.exists()


def test_edited_args_are_the_approved_args(run):
    edited = {**TICKET, "title": "edited by bob"}
    approval = _approval(
        run, args=TICKET, decision={"decision": "edit", "args": edited}, status="edited"
    )
    with pytest.raises(EffectArgsMismatch):
        effect_execute(
            run_id=run.thread_id,
            key="k1",
            tool="create_incident_ticket",
            args=TICKET,
            approval_id=approval.pk,
        )
    effect_execute(
        run_id=run.thread_id,
        key="k2",
        tool="create_incident_ticket",
        args=edited,
        approval_id=approval.pk,
    )
    effect = Effect.objects.get()
    assert (effect.key, effect.approval_id) == ("k2", approval.pk)
    assert SandboxTicket.objects.get().title == "edited by bob"


def test_a_rejected_approval_runs_nothing(run):
    approval = _approval(run, args=TICKET, decision={"decision": "reject"}, status="rejected")
    with pytest.raises(EffectArgsMismatch):
        effect_execute(
            run_id=run.thread_id,
            key="k",
            tool="create_incident_ticket",
            args=TICKET,
            approval_id=approval.pk,
        )
    assert not SandboxTicket.objects.exists()


def test_retryable_errors_are_retried_then_succeed(run, downstream, settings):
    settings.TOOL_MAX_RETRIES = 3
    downstream.script = [RetryableToolError("503"), RetryableToolError("429", status=429)]
    result = effect_execute(run_id=run.thread_id, key="k", tool="echo_test", args={"text": "hi"})
    assert result == {"echo": "hi", "call": 3}
    assert [key for _, key in downstream.calls] == ["k", "k", "k"]
    assert Effect.objects.get().attempts == 3


def test_retries_are_bounded_then_the_effect_fails(run, downstream, settings):
    settings.TOOL_MAX_RETRIES = 2
    downstream.script = [RetryableToolError("503")] * 5
    with pytest.raises(RetryableToolError):
        effect_execute(run_id=run.thread_id, key="k", tool="echo_test", args={"text": "hi"})
    assert len(downstream.calls) == 3
    effect = Effect.objects.get()
    assert (effect.status, effect.attempts) == (Effect.Status.FAILED, 3)
    assert "503" in effect.error
    assert actions(run) == ["effect.claimed", "effect.failed"]
    assert AuditEvent.objects.get(action="effect.failed").data["retryable"] is True


def test_non_retryable_errors_fail_at_once(run, downstream, settings):
    settings.TOOL_MAX_RETRIES = 3
    downstream.script = [ToolError("card declined", status=402)]
    with pytest.raises(ToolError, match="card declined"):
        effect_execute(run_id=run.thread_id, key="k", tool="echo_test", args={"text": "hi"})
    assert len(downstream.calls) == 1
    assert Effect.objects.get().status == Effect.Status.FAILED


def test_a_failed_effect_is_tried_again_with_the_same_key(run, downstream, settings):
    settings.TOOL_MAX_RETRIES = 0
    downstream.script = [RetryableToolError("503")]
    with pytest.raises(RetryableToolError):
        effect_execute(run_id=run.thread_id, key="k", tool="echo_test", args={"text": "hi"})
    result = effect_execute(run_id=run.thread_id, key="k", tool="echo_test", args={"text": "hi"})
    assert result == {"echo": "hi", "call": 2}
    effect = Effect.objects.get()
    assert (effect.status, effect.attempts) == (Effect.Status.SUCCEEDED, 2)


def test_a_slow_downstream_times_out_and_is_retried(run, downstream, settings):
    settings.TOOL_TIMEOUT_SECONDS = 0.2
    settings.TOOL_MAX_RETRIES = 1
    downstream.delay = 1.0
    started = time.monotonic()
    result = effect_execute(run_id=run.thread_id, key="k", tool="echo_test", args={"text": "hi"})
    assert time.monotonic() - started < 0.9
    assert len(downstream.calls) == 2
    assert result["echo"] == "hi"


def test_compensation_runs_exactly_once(run):
    key = f"{run.thread_id}:t"
    effect_execute(run_id=run.thread_id, key=key, tool="create_incident_ticket", args=TICKET)
    effect = Effect.objects.get(key=key)
    first = effect_compensate(effect=effect)
    second = effect_compensate(effect=effect)
    assert first.pk == second.pk
    assert first.key == f"{key}:compensate"
    assert first.compensates_id == effect.pk
    assert effect.status == Effect.Status.COMPENSATED
    assert SandboxTicket.objects.get().status == SandboxTicket.Status.CLOSED
    assert Effect.objects.count() == 2
    assert AuditEvent.objects.filter(action="effect.compensated").count() == 1


def test_run_compensate_undoes_effects_newest_first(run):
    sandbox.deploy_record(service="checkout", version="v2", previous_version="v1")
    effect_execute(run_id=run.thread_id, key="a", tool="create_incident_ticket", args=TICKET)
    effect_execute(
        run_id=run.thread_id,
        key="b",
        tool="rollback_deploy",
        args={"service": "checkout", "from_version": "v2", "to_version": "v1"},
    )
    compensations = run_compensate(run_id=run.thread_id)
    assert [c.key for c in compensations] == ["b:compensate", "a:compensate"]
    assert [c.tool for c in compensations] == ["roll_forward_deploy", "close_incident_ticket"]
    assert sandbox.deploy_current(service="checkout").version == "v2"
    assert run_compensate(run_id=run.thread_id) == []
    assert set(Effect.objects.filter(key__in=["a", "b"]).values_list("status", flat=True)) == {
        "compensated"
    }


def test_run_compensate_undoes_what_it_can_and_names_what_it_could_not(run):
    sandbox.deploy_record(service="checkout", version="v2", previous_version="v1")
    effect_execute(run_id=run.thread_id, key="a", tool="create_incident_ticket", args=TICKET)
    effect_execute(
        run_id=run.thread_id,
        key="b",
        tool="rollback_deploy",
        args={"service": "checkout", "from_version": "v2", "to_version": "v1"},
    )
    # Someone deployed v3 meanwhile, so moving back to v2 is refused by the deploy system.
    sandbox.deploy_record(service="checkout", version="v3", previous_version="v1")
    with pytest.raises(CompensationFailed) as error:
        run_compensate(run_id=run.thread_id)
    assert error.value.failed == ["b"]
    assert [c.key for c in error.value.compensated] == ["a:compensate"]
    assert Effect.objects.get(key="b").status == Effect.Status.SUCCEEDED
    assert Effect.objects.get(key="b:compensate").status == Effect.Status.FAILED
    assert SandboxTicket.objects.get().status == SandboxTicket.Status.CLOSED
