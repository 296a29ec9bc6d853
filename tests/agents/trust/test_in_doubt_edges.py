"""Effects in doubt at the edges: found after a cancel, "not found" while a call may land, an
HTTP client's timeout, and a second call that must be audited."""

from __future__ import annotations

import contextlib
import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from agents.effects import ledger
from agents.effects.errors import ToolTimeout
from agents.effects.ledger import effect_execute
from agents.models import Effect
from agents.runtime import advance
from agents.runtime.registry import agent_unregister
from agents.services import effect_settle, run_start
from agents.tools import ToolSpec, tool_register, tool_unregister
from approvals.models import AgentRun
from audit.models import AuditEvent
from tests.support.pay_agents import (
    WorkerKilled,
    advances_drain,
    pay_agent_register,
)
from tests.support.providers import PayArgs

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_cancelled_runs_effect_found_later_is_compensated(late, alice, queued, settings):
    """Cancel: an effect still in doubt is escalated, not undone (right: it may not have
    happened). When the sweep later finds that it did happen, the cancelled run must still
    undo it: cancel promises its applied effects are compensated."""
    from agents import tasks
    from agents.services import run_cancel
    from tests.support.factories import RunFactory

    run = RunFactory(requested_by=alice, status=AgentRun.Status.RUNNING)
    key = f"{run.thread_id}:pay"
    late.script = ["timeout"]
    with pytest.raises(ToolTimeout):
        effect_execute(run_id=str(run.id), key=key, tool="lpay", args={"amount": 30})
    run_cancel(run=run, user=alice)
    advances_drain(queued)  # compensation: the payment is in doubt, so it is escalated
    assert Effect.objects.get(key=key).status == Effect.Status.IN_DOUBT

    late.land(key, 30)  # the call was in flight: the money moved after all
    settings.EFFECT_SETTLE_AFTER_SECONDS = 0  # the quiet period is over
    tasks.runs_recover()  # the every-minute sweep settles it by lookup
    advances_drain(queued)

    assert Effect.objects.get(key=key).status == Effect.Status.COMPENSATED
    assert late.undone == [f"{key}:compensate"]


def test_a_cancelled_runs_effect_a_person_settles_as_done_is_compensated(late, alice, bob, queued):
    """Same, when a person answers "it happened" for the escalated effect."""
    from agents.services import run_cancel
    from tests.support.factories import RunFactory

    run = RunFactory(requested_by=alice, status=AgentRun.Status.RUNNING)
    key = f"{run.thread_id}:pay"
    late.script = ["timeout"]
    with pytest.raises(ToolTimeout):
        effect_execute(run_id=str(run.id), key=key, tool="lpay", args={"amount": 30})
    run_cancel(run=run, user=alice)
    advances_drain(queued)
    effect = Effect.objects.get(key=key)
    assert effect.escalated_at is not None

    effect_settle(effect=effect, outcome="done", user=bob, note="seen at the bank")
    advances_drain(queued)

    assert Effect.objects.get(key=key).status == Effect.Status.COMPENSATED


def test_not_found_right_after_a_call_started_is_not_never_acted(late, alice, settings):
    """guarantees.md: a lookup that finds nothing settles the effect as failed only
    EFFECT_SETTLE_AFTER_SECONDS after its last attempt. An effect in doubt for long is called
    again; that worker is killed mid-call (the call is in flight). One second later the lookup
    finds nothing yet: that must not be "it never acted"."""
    from agents.effects.compensation import run_compensate
    from agents.effects.errors import CompensationFailed
    from tests.support.factories import RunFactory

    run = RunFactory(requested_by=alice, status=AgentRun.Status.RUNNING)
    key = f"{run.thread_id}:pay"
    late.script = ["timeout"]
    with pytest.raises(ToolTimeout):
        effect_execute(run_id=str(run.id), key=key, tool="lpay", args={"amount": 30})
    # Long ago: no call under this key can still land ...
    Effect.objects.filter(key=key).update(
        updated_at=timezone.now() - dt.timedelta(seconds=settings.EFFECT_SETTLE_AFTER_SECONDS + 60)
    )
    late.script = ["killed"]  # ... so the replay calls again, and its worker dies mid-call
    with pytest.raises(WorkerKilled):
        effect_execute(run_id=str(run.id), key=key, tool="lpay", args={"amount": 30})
    assert Effect.objects.get(key=key).status == Effect.Status.CLAIMED

    # The run is cancelled now; the call that was just made may still land.
    AgentRun.objects.filter(pk=run.pk).update(cancel_requested=True, status="cancelled")
    with contextlib.suppress(CompensationFailed):  # escalated: nobody can say yet
        run_compensate(run_id=str(run.id))
    effect = Effect.objects.get(key=key)
    assert (effect.status, effect.error) == (Effect.Status.CLAIMED, "")


def _http_client_errors() -> list[BaseException]:
    import httpx
    import requests

    return [
        requests.exceptions.ReadTimeout("read timed out"),
        requests.exceptions.ConnectionError("connection reset"),
        httpx.ReadTimeout("read timed out"),
        httpx.ConnectError("connection refused"),
    ]


@pytest.mark.parametrize(
    "error",
    _http_client_errors(),
    ids=lambda e: f"{type(e).__module__.split('.')[0]}-{type(e).__name__}",
)
def test_a_tool_whose_http_client_times_out_is_retried_not_dead(
    error, settings, monkeypatch, alice, queued
):
    """DESIGN.md: "retryable: 429/5xx/timeouts"; guarantees.md: a timeout leaves the effect in
    doubt and the run retries. An agent author's tool calls its API with requests or httpx;
    the read times out once (the downstream may have acted)."""
    settings.TOOL_MAX_RETRIES = 0
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)
    script = [error]

    def call_api(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        if script:
            raise script.pop()
        return {"paid": args["amount"]}

    tool_register(
        ToolSpec(name="http_pay", description="p", args_model=PayArgs, tier="write", run=call_api)
    )
    spec = pay_agent_register("http_pay")
    try:
        run = run_start(agent=spec.name, input={"amount": 5}, user=alice)
        outcome = advance.run_advance(run_id=run.id)
    finally:
        agent_unregister(spec.name)
        tool_unregister("http_pay")
    run.refresh_from_db()
    assert run.status == AgentRun.Status.QUEUED, outcome  # retrying, not dead
    if "Timeout" in type(error).__name__:  # the downstream may have acted
        assert Effect.objects.get(run=run).status == Effect.Status.IN_DOUBT


def test_calling_an_effect_in_doubt_again_is_audited(late, alice):
    """An effect in doubt that the lookup does not find (yet) is claimed again and called a
    second time under its key. That status change (in_doubt -> claimed) and the second call
    must be in the audit trail like the first claim, not only implied by "attempts"."""
    from tests.support.factories import RunFactory

    run = RunFactory(requested_by=alice, status=AgentRun.Status.RUNNING)
    key = f"{run.thread_id}:pay"
    late.script = ["timeout"]
    with pytest.raises(ToolTimeout):
        effect_execute(run_id=str(run.id), key=key, tool="lpay", args={"amount": 30})
    assert effect_execute(run_id=str(run.id), key=key, tool="lpay", args={"amount": 30}) == {
        "paid": 30
    }
    actions = list(
        AuditEvent.objects.filter(run_id=run.id).order_by("seq").values_list("action", flat=True)
    )
    assert actions.count("effect.claimed") == 2, actions


def test_a_claim_left_by_a_dead_worker_of_a_run_that_ended_is_settled_by_the_sweep(late, alice):
    """The worker died mid-call and the run then ended (dead): nothing will replay it. The
    sweep asks the downstream by key like it does for effects in doubt."""
    from agents import tasks
    from tests.support.factories import RunFactory

    run = RunFactory(requested_by=alice, status=AgentRun.Status.RUNNING)
    key = f"{run.thread_id}:pay"
    late.script = ["killed"]
    with pytest.raises(WorkerKilled):
        effect_execute(run_id=str(run.id), key=key, tool="lpay", args={"amount": 30})
    late.land(key, 30)  # it acted before the worker died
    AgentRun.objects.filter(pk=run.pk).update(status=AgentRun.Status.DEAD)
    tasks.runs_recover()
    assert Effect.objects.get(key=key).status == Effect.Status.SUCCEEDED
