"""A timeout is an unknown outcome, not a failure (invariant 13); cancel stops new effects before
they are claimed (invariant 14). Faults are injected at the one patch point per downstream call:
the tool's ``run``, in front of a provider that records what it did by idempotency key."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from agents.effects import ledger
from agents.effects.errors import RunCancelled, ToolError, ToolTimeout
from agents.effects.ledger import effect_execute
from agents.effects.reconcile import effects_reconcile
from agents.models import Effect
from agents.runtime.failures import is_retryable
from agents.tools import ToolSpec, tool_register, tool_unregister
from approvals.models import AgentRun
from audit.models import AuditEvent
from tests.support.factories import RunFactory
from tests.support.providers import KeylessProvider, PayArgs, keyless_tool_register

pytestmark = pytest.mark.django_db(transaction=True)


class Provider:
    """A payment provider: dedupes by idempotency key and answers lookups by key.

    ``script`` says what the next calls do: "ok", "act_then_timeout", "timeout", "hang",
    or an HTTP status (429, 500, 400).
    """

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}
        self.calls = 0
        self.script: list[Any] = []
        self.release = threading.Event()

    def run(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        self.calls += 1
        step = self.script.pop(0) if self.script else "ok"
        if step == "timeout":
            raise ToolTimeout("no answer")
        if step == "hang":
            self.release.wait(5)
            raise ToolTimeout("still no answer")
        if isinstance(step, int):
            error = ToolError(f"HTTP {step}", status=step)
            if step == 429 or step >= 500:
                from agents.effects.errors import RetryableToolError

                error = RetryableToolError(f"HTTP {step}", status=step)
            raise error
        record = self.records.setdefault(
            key, {"paid": args["amount"], "ref": f"pay-{len(self.records) + 1}"}
        )
        if step == "act_then_timeout":
            raise ToolTimeout("acted, then the answer was lost")
        return record

    def lookup(self, key: str) -> dict[str, Any] | None:
        return self.records.get(key)


@pytest.fixture
def provider(settings, monkeypatch):
    settings.TOOL_MAX_RETRIES = 0
    settings.TOOL_TIMEOUT_SECONDS = 0.3
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)
    fake = Provider()
    tool_register(
        ToolSpec(
            name="pay",
            description="pay",
            args_model=PayArgs,
            tier="write",
            run=fake.run,
            lookup=fake.lookup,
        )
    )
    yield fake
    fake.release.set()
    tool_unregister("pay")


@pytest.fixture
def run(alice) -> AgentRun:
    return RunFactory(requested_by=alice)


def _pay(run: AgentRun, key: str = "call-1") -> dict[str, Any]:
    return effect_execute(
        run_id=str(run.id), key=f"{run.thread_id}:{key}", tool="pay", args={"amount": 5}
    )


def _effect(run: AgentRun) -> Effect:
    return Effect.objects.get(run=run, tool="pay")


def test_a_timeout_after_the_downstream_acted_is_in_doubt_then_settled_without_a_second_call(
    provider, run
):
    provider.script = ["act_then_timeout"]
    with pytest.raises(ToolTimeout) as timed_out:
        _pay(run)
    assert is_retryable(timed_out.value)
    assert _effect(run).status == Effect.Status.IN_DOUBT
    assert provider.calls == 1

    result = _pay(run)  # the run's retry replays the call

    assert result == {"paid": 5, "ref": "pay-1"}
    assert provider.calls == 1
    assert _effect(run).status == Effect.Status.SUCCEEDED
    assert len(provider.records) == 1
    assert AuditEvent.objects.filter(action="effect.reconciled", run_id=run.id).exists()


def test_a_timeout_before_the_downstream_acted_is_called_again_once(provider, run):
    provider.script = ["timeout"]
    with pytest.raises(ToolTimeout):
        _pay(run)
    assert _effect(run).status == Effect.Status.IN_DOUBT

    assert _pay(run) == {"paid": 5, "ref": "pay-1"}
    assert provider.calls == 2
    assert len(provider.records) == 1


def test_a_hung_downstream_is_in_doubt_not_failed(provider, run):
    provider.script = ["hang"]
    started = time.monotonic()
    with pytest.raises(ToolTimeout):
        _pay(run)
    assert time.monotonic() - started < 3
    assert _effect(run).status == Effect.Status.IN_DOUBT


@pytest.mark.parametrize("status", [429, 500])
def test_a_429_or_500_is_retried_with_the_same_key(provider, run, settings, status):
    settings.TOOL_MAX_RETRIES = 2
    provider.script = [status]
    assert _pay(run) == {"paid": 5, "ref": "pay-1"}
    assert provider.calls == 2
    assert _effect(run).status == Effect.Status.SUCCEEDED


def test_a_400_fails_at_once(provider, run, settings):
    settings.TOOL_MAX_RETRIES = 2
    provider.script = [400]
    with pytest.raises(ToolError) as refused:
        _pay(run)
    assert not is_retryable(refused.value)
    assert provider.calls == 1
    assert _effect(run).status == Effect.Status.FAILED


def test_the_sweep_settles_effects_in_doubt_and_escalates_those_it_cannot(provider, run, settings):
    settings.EFFECT_SETTLE_AFTER_SECONDS = 0  # no call under these keys can still land
    provider.script = ["act_then_timeout", "timeout"]
    with pytest.raises(ToolTimeout):
        _pay(run, "call-1")
    with pytest.raises(ToolTimeout):
        _pay(run, "call-2")
    blind = RunFactory(requested_by=run.requested_by)
    tool_register(
        ToolSpec(
            name="blind_pay",
            description="p",
            args_model=PayArgs,
            tier="write",
            run=lambda args, key: (_ for _ in ()).throw(ToolTimeout("no answer")),
        )
    )
    try:
        with pytest.raises(ToolTimeout):
            effect_execute(
                run_id=str(blind.id), key=f"{blind.id}:x", tool="blind_pay", args={"amount": 1}
            )

        counts = effects_reconcile()
        again = effects_reconcile()
    finally:
        tool_unregister("blind_pay")

    assert counts == {"succeeded": 1, "not_done": 1, "escalated": 1}
    assert again == {"succeeded": 0, "not_done": 0, "escalated": 0}
    statuses = dict(Effect.objects.values_list("key", "status"))
    assert statuses[f"{run.thread_id}:call-1"] == Effect.Status.SUCCEEDED
    assert statuses[f"{run.thread_id}:call-2"] == Effect.Status.FAILED
    assert statuses[f"{blind.id}:x"] == Effect.Status.IN_DOUBT
    assert AuditEvent.objects.filter(action="effect.escalated", run_id=blind.id).count() == 1


def test_a_cancelled_run_claims_no_new_effect(provider, run):
    AgentRun.objects.filter(pk=run.pk).update(cancel_requested=True)
    with pytest.raises(RunCancelled):
        _pay(run)
    assert provider.calls == 0
    assert not Effect.objects.filter(run=run).exists()


def test_a_cancel_stops_the_next_attempt_of_a_call_too(provider, run, settings):
    """The first attempt timed out (it may have acted); the run is cancelled before the retry:
    no further call goes out, and the effect stays in doubt for the lookup to settle."""
    settings.TOOL_MAX_RETRIES = 2

    def cancel_then_time_out(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        provider.calls += 1
        AgentRun.objects.filter(pk=run.pk).update(cancel_requested=True)
        raise ToolTimeout("no answer")

    provider.run = cancel_then_time_out  # type: ignore[method-assign]
    tool_register(
        ToolSpec(
            name="pay",
            description="pay",
            args_model=PayArgs,
            tier="write",
            run=cancel_then_time_out,
            lookup=provider.lookup,
        )
    )
    with pytest.raises(RunCancelled):
        _pay(run)
    assert provider.calls == 1
    assert _effect(run).status == Effect.Status.IN_DOUBT


@pytest.fixture
def payment_times_out_after_paying(settings, monkeypatch):
    """The sandbox payment provider pays, then the answer is lost (once)."""
    import dataclasses

    from agents.tools import tool_get

    settings.TOOL_MAX_RETRIES = 0
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)
    real = tool_get("refund_payment")
    lost = {"once": True}

    def pays_then_times_out(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        result = real.run(args, key)
        if lost.pop("once", False):
            raise ToolTimeout("paid, then the answer was lost")
        return result

    tool_register(dataclasses.replace(real, run=pays_then_times_out))
    yield
    tool_register(real)


def test_the_refund_saga_does_not_report_rolled_back_while_the_payment_went_through(
    payment_times_out_after_paying, run
):
    from agents.graphs.refund_agent.saga import refund_saga_run
    from agents.models import SandboxPayment

    args = {
        "order_id": "A-9",
        "amount": "40.00",
        "reason": "damaged",
        "sku": "MUG-1",
        "quantity": 1,
        "customer_email": "pat@example.com",
        "currency": "USD",
    }
    with pytest.raises(ToolTimeout):
        refund_saga_run(run_id=str(run.id), key=f"{run.thread_id}:refund", args=args)
    assert SandboxPayment.objects.filter(kind="refund").count() == 1

    outcome = refund_saga_run(run_id=str(run.id), key=f"{run.thread_id}:refund", args=args)

    assert outcome["status"] == "refunded"
    assert SandboxPayment.objects.filter(kind="refund").count() == 1
    assert not SandboxPayment.objects.filter(kind="refund_reversal").exists()


class SlowProvider(Provider):
    """Acts a while after it received the call: a timed-out call that still lands."""

    def run(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        self.calls += 1
        time.sleep(0.8)
        return self.records.setdefault(key, {"paid": args["amount"], "ref": "late"})


@pytest.fixture
def slow_provider(settings, monkeypatch):
    settings.TOOL_MAX_RETRIES = 0
    settings.TOOL_TIMEOUT_SECONDS = 0.2
    fake = SlowProvider()
    tool_register(
        ToolSpec(
            name="slowpay",
            description="p",
            args_model=PayArgs,
            tier="write",
            run=fake.run,
            lookup=fake.lookup,
        )
    )
    yield fake
    tool_unregister("slowpay")


def _slow_pay(run: AgentRun) -> str:
    key = f"{run.thread_id}:call-1"
    with pytest.raises(ToolTimeout):
        effect_execute(run_id=str(run.id), key=key, tool="slowpay", args={"amount": 500})
    return key


def test_the_sweep_does_not_call_a_call_in_flight_never_acted(slow_provider, run):
    key = _slow_pay(run)
    assert effects_reconcile() == {"succeeded": 0, "not_done": 0, "escalated": 0}
    time.sleep(1.0)  # the late call lands
    assert Effect.objects.get(key=key).status == Effect.Status.IN_DOUBT
    assert effects_reconcile()["succeeded"] == 1
    assert Effect.objects.get(key=key).status == Effect.Status.SUCCEEDED


def test_compensation_escalates_a_call_in_flight_instead_of_calling_it_never_acted(
    slow_provider, run
):
    from agents.effects.compensation import run_compensate
    from agents.effects.errors import CompensationFailed

    key = _slow_pay(run)
    AgentRun.objects.filter(pk=run.pk).update(cancel_requested=True, status="cancelled")
    with pytest.raises(CompensationFailed) as failed:
        run_compensate(run_id=str(run.id))
    assert failed.value.failed == [key]
    assert Effect.objects.get(key=key).status == Effect.Status.IN_DOUBT
    assert AuditEvent.objects.filter(action="effect.escalated", run_id=run.id).count() == 1
    assert not AuditEvent.objects.filter(action="effect.reconciled", run_id=run.id).exists()


def test_not_found_long_after_the_last_attempt_means_it_never_acted(provider, run, settings):
    settings.EFFECT_SETTLE_AFTER_SECONDS = 0
    provider.script = ["timeout"]
    with pytest.raises(ToolTimeout):
        _pay(run)
    assert effects_reconcile()["not_done"] == 1
    assert _effect(run).status == Effect.Status.FAILED


@pytest.fixture
def keyless(settings, monkeypatch):
    settings.TOOL_MAX_RETRIES = 3
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)
    fake = KeylessProvider()
    keyless_tool_register("keyless", fake)
    yield fake
    tool_unregister("keyless")


def test_a_tool_without_a_key_is_never_called_twice(keyless, run):
    from agents.effects.errors import EffectInDoubt

    keyless.script = ["act_then_timeout"]
    key = f"{run.thread_id}:call-1"
    with pytest.raises(ToolTimeout):  # no retry: it could not be deduped
        effect_execute(run_id=str(run.id), key=key, tool="keyless", args={"amount": 500})
    assert keyless.payments == [500]
    effects_reconcile()
    with pytest.raises(EffectInDoubt):  # the run's replay: a person settles it, no call
        effect_execute(run_id=str(run.id), key=key, tool="keyless", args={"amount": 500})
    assert keyless.payments == [500]
    assert Effect.objects.get(key=key).status == Effect.Status.IN_DOUBT
    assert AuditEvent.objects.filter(action="effect.escalated", run_id=run.id).count() == 1
