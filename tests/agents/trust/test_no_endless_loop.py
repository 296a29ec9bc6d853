"""No loop without end (a step never outlasts the task timeout; an advance that died mid-step
counts as a failure) and a worker that lost its lease changes nothing (invariant 14)."""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

import pytest
from django.utils import timezone
from pydantic import BaseModel

from agents.effects import ledger
from agents.effects.errors import ToolTimeout
from agents.models import Effect
from agents.runtime import advance, lease
from agents.services import run_start
from agents.tools import ToolSpec, tool_register, tool_unregister
from approvals.models import AgentRun
from approvals.services import (
    LeaseLostError,
    run_mark_completed,
    run_transitions_fenced,
)
from audit.models import AuditEvent
from tests.support.factories import RunFactory
from tests.support.pay_agents import die_mid_step

pytestmark = pytest.mark.django_db(transaction=True)


class Args(BaseModel):
    n: int


def test_a_tool_call_never_waits_past_the_advance_deadline(settings, monkeypatch, alice):
    """Today one call could take TOOL_TIMEOUT x (retries + 1) plus backoff (~124 s) while the
    task is killed at Q_TIMEOUT (45 s)."""
    settings.TOOL_TIMEOUT_SECONDS = 1.0
    settings.TOOL_MAX_RETRIES = 5
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.01)
    release = threading.Event()

    def hangs(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        release.wait(10)
        return {}

    tool_register(ToolSpec(name="hangs", description="h", args_model=Args, tier="write", run=hangs))
    run = RunFactory(requested_by=alice)
    try:
        from langgraph.func import entrypoint

        @entrypoint()
        def one_step(_: Any) -> Any:
            return ledger.effect_execute(
                run_id=str(run.id), key=f"{run.id}:k", tool="hangs", args={"n": 1}
            )

        started = time.monotonic()
        with pytest.raises(ToolTimeout):
            one_step.invoke(1, {"configurable": {"thread_id": "t", "deadline": time.time() + 1.5}})
        took = time.monotonic() - started
    finally:
        release.set()
        tool_unregister("hangs")
    assert took < 3.0
    assert Effect.objects.get(key=f"{run.id}:k").status == Effect.Status.IN_DOUBT


class Killed(BaseException):
    """What a task killed mid-step looks like from inside (no ``except Exception`` sees it)."""


def _killed_step(state: dict) -> dict:
    raise Killed()


def test_an_advance_that_died_mid_step_counts_and_the_run_is_dead_after_the_budget(alice, settings):
    """The same step dies every time (it outlasts the task timeout): no progress in between."""
    from langgraph.graph import END, START, StateGraph

    from agents.runtime.registry import AgentSpec, agent_register, agent_unregister

    def build(*, checkpointer: Any = None) -> Any:
        builder = StateGraph(dict)
        builder.add_node("too_long", _killed_step)
        builder.add_edge(START, "too_long")
        builder.add_edge("too_long", END)
        return builder.compile(checkpointer=checkpointer)

    settings.RUN_MAX_FAILURES = 3
    agent_register(AgentSpec(name="killed_agent", version="1", factory=build))
    try:
        run = run_start(agent="killed_agent", input={}, user=alice)
        with pytest.raises(Killed):
            advance.run_advance(run_id=run.id)
        outcomes = []
        for _ in range(3):
            die_mid_step(run)
            try:
                outcomes.append(advance.run_advance(run_id=run.id))
            except Killed:
                outcomes.append("killed")
    finally:
        agent_unregister("killed_agent")
    run.refresh_from_db()
    assert run.status == AgentRun.Status.DEAD, outcomes
    assert run.failure_count == 3
    assert outcomes == ["killed", "killed", outcomes[-1]] and outcomes[-1].startswith("dead")
    assert AuditEvent.objects.filter(action="run.recovered", run_id=run.id).count() == 3
    assert AuditEvent.objects.filter(action="run.escalated", run_id=run.id).count() == 1


def test_one_death_mid_step_is_counted_and_the_run_goes_on(note_agent, alice):
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
    die_mid_step(run)
    assert advance.run_advance(run_id=run.id) == "waiting"
    recovered = AuditEvent.objects.get(action="run.recovered", run_id=run.id)
    assert recovered.data["failure_count"] == 1
    run.refresh_from_db()
    assert run.failure_count == 0  # the steps it then took were progress (failures in a row)


def test_a_worker_that_lost_its_lease_makes_no_transition(alice):
    run = RunFactory(requested_by=alice, status=AgentRun.Status.RUNNING)
    assert lease.lease_acquire(run_id=run.id, owner="w1") is not None
    AgentRun.objects.filter(pk=run.pk).update(
        lease_expires_at=timezone.now() - dt.timedelta(seconds=1)
    )
    assert lease.lease_acquire(run_id=run.id, owner="w2") is not None  # w2 took it over
    with run_transitions_fenced(lease_owner="w1"), pytest.raises(LeaseLostError):
        run_mark_completed(run=run, output={"stale": True})
    run.refresh_from_db()
    assert run.status == AgentRun.Status.RUNNING
    assert run.output != {"stale": True}
    assert not AuditEvent.objects.filter(action="run.completed", run_id=run.id).exists()
