"""The failure budget counts what failed, in a row: a run waiting for a person, a settle, a
deadline continuation or a step that got done costs nothing; a stale worker flags nothing."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.utils import timezone
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph

from agents.effects import ledger
from agents.effects.ledger import effect_execute
from agents.models import Effect
from agents.runtime import advance, recovery
from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from agents.services import effect_settle, run_start
from agents.tools import ToolSpec, tool_register, tool_unregister
from approvals.models import AgentRun
from audit.models import AuditEvent
from tests.support.pay_agents import (
    ADVANCE_TASK,
    PayState,
    pay_agent_register,
)
from tests.support.providers import KeylessProvider, PayArgs
from tests.support.queue import tasks_named

pytestmark = pytest.mark.django_db(transaction=True)


def _stale(run: AgentRun) -> None:
    """Time passes: the run's row is older than the sweep's orphan threshold (Q_RETRY)."""
    AgentRun.objects.filter(pk=run.pk).update(
        updated_at=timezone.now() - dt.timedelta(seconds=django_settings.Q_RETRY + 5)
    )


def _flagged_in_doubt(spec: AgentSpec, alice) -> AgentRun:
    """Start the run and advance it until it waits for a person to settle its payment."""
    run = run_start(agent=spec.name, input={"amount": 70}, user=alice)
    first = advance.run_advance(run_id=run.id)
    assert first.startswith("retrying"), first  # the timeout: retryable, counted once
    second = advance.run_advance(run_id=run.id)  # the retry's replay: a person must settle
    assert second == "flagged: effect in doubt", second
    run.refresh_from_db()
    assert run.flag and run.failure_count == 1
    return run


def test_a_run_waiting_for_a_person_to_settle_is_not_killed_by_the_sweep(
    keyless_agent, alice, queued
):
    """guarantees.md: "the effect is escalated to a person and the run is flagged
    (EffectInDoubt), not dead". Nothing failed after the flag: the sweep re-enqueueing the run
    must not count failures against it."""
    spec, downstream = keyless_agent
    run = _flagged_in_doubt(spec, alice)
    outcomes = []
    for _ in range(django_settings.RUN_MAX_FAILURES):  # one sweep a minute, nobody settled yet
        _stale(run)
        queued.reset_mock()
        recovery.runs_recover()
        for _name, run_id, *_rest in tasks_named(queued, ADVANCE_TASK):
            outcomes.append(advance.run_advance(run_id=run_id))
    run.refresh_from_db()
    assert downstream.payments == [70]
    # It waits for a person (status waiting, flagged); the one real failure is all it counts.
    assert (run.status, run.failure_count) == (AgentRun.Status.WAITING, 1), outcomes
    assert not AuditEvent.objects.filter(action="run.escalated", run_id=run.id).exists()


def test_settling_an_effect_does_not_cost_the_run_a_failure(
    keyless_agent, alice, bob, queued, settings
):
    """A person settles the flagged run's effect: the run goes on and completes; the settle
    (a wake-up, not a death mid-step) is not counted toward RUN_MAX_FAILURES."""
    settings.RUN_MAX_FAILURES = 2  # one real failure (the timeout) fits the budget
    spec, downstream = keyless_agent
    run = _flagged_in_doubt(spec, alice)
    effect = Effect.objects.get(run=run)
    effect_settle(effect=effect, outcome="done", user=bob, note="seen in the bank")
    outcome = advance.run_advance(run_id=run.id)  # the wake-up the settle enqueued
    run.refresh_from_db()
    assert downstream.payments == [70]
    assert run.status == AgentRun.Status.COMPLETED, outcome
    assert run.failure_count == 0  # the step got done: failures count since the last step


def test_the_advance_deadline_does_not_turn_a_healthy_call_into_a_failure(settings, alice, queued):
    """One step makes two calls of a healthy keyless downstream (0.4 s each) and the advance's
    deadline is 0.6 s. Nothing fails: the run should finish (continuing in a new task if it
    must) without a failure counted and without a person having to settle anything."""
    import time as _time

    settings.RUN_ADVANCE_DEADLINE_SECONDS = 0.6
    settings.TOOL_TIMEOUT_SECONDS = 5.0
    settings.TOOL_MAX_RETRIES = 0
    calls: list[str] = []

    def healthy(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        _time.sleep(0.4)
        calls.append(args["step"])
        return {"done": args["step"]}

    from pydantic import BaseModel

    class StepArgs(BaseModel):
        step: str

    tool_register(
        ToolSpec(
            name="slow_ok",
            description="s",
            args_model=StepArgs,
            tier="write",
            run=healthy,
            takes_key=False,
        )
    )

    def two_calls(state: PayState) -> dict[str, Any]:
        thread_id = get_config()["configurable"]["thread_id"]
        for step in ("a", "b"):
            effect_execute(
                run_id=thread_id, key=f"{thread_id}:{step}", tool="slow_ok", args={"step": step}
            )
        return {"paid": {"ok": True}}

    def build(*, checkpointer: Any = None) -> Any:
        builder = StateGraph(PayState)
        builder.add_node("two_calls", two_calls)
        builder.add_edge(START, "two_calls")
        builder.add_edge("two_calls", END)
        return builder.compile(checkpointer=checkpointer)

    agent_register(AgentSpec(name="two_calls_agent", version="1", factory=build))
    try:
        run = run_start(agent="two_calls_agent", input={"amount": 1}, user=alice)
        outcomes = [advance.run_advance(run_id=run.id) for _ in range(3)]
    finally:
        agent_unregister("two_calls_agent")
        tool_unregister("slow_ok")
    run.refresh_from_db()
    _time.sleep(0.5)  # let a call cut off by the deadline land
    assert (run.status, run.failure_count, run.flag) == (AgentRun.Status.COMPLETED, 0, ""), outcomes
    assert calls == ["a", "b"]


def test_the_failure_budget_is_per_episode_not_per_lifetime(settings, alice, queued):
    """A durable run lives for days: it survives deploys and blips. Each step here meets one
    transient error (a database blip, a 503) and succeeds on its retry; every retry made
    progress. The run should not be dead because blips add up over its life."""
    settings.RUN_MAX_FAILURES = 3
    failed_once: set[str] = set()

    def step(name: str) -> Any:
        def node(state: PayState) -> dict[str, Any]:
            if name not in failed_once:
                failed_once.add(name)
                raise ConnectionError(f"blip in {name}")
            return {}

        return node

    def build(*, checkpointer: Any = None) -> Any:
        builder = StateGraph(PayState)
        previous = START
        for name in ("one", "two", "three"):
            builder.add_node(name, step(name))
            builder.add_edge(previous, name)
            previous = name
        builder.add_edge(previous, END)
        return builder.compile(checkpointer=checkpointer)

    agent_register(AgentSpec(name="blips_agent", version="1", factory=build))
    try:
        run = run_start(agent="blips_agent", input={"amount": 1}, user=alice)
        outcomes = [advance.run_advance(run_id=run.id) for _ in range(4)]
    finally:
        agent_unregister("blips_agent")
    run.refresh_from_db()
    assert run.status == AgentRun.Status.COMPLETED, outcomes


def test_a_worker_that_lost_its_lease_does_not_flag_the_run_or_drop_the_new_lease(
    settings, monkeypatch, alice, queued
):
    """Worker A replays an effect in doubt; while it asks the downstream, its lease lapses and
    worker B takes the run over. A's lookup fails, so A concludes a person must settle it. A
    no longer holds the lease: it must change nothing (no flag, and B keeps its lease)."""
    settings.TOOL_MAX_RETRIES = 0
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)
    downstream = KeylessProvider("act_then_timeout")
    state: dict[str, Any] = {}

    def lookup(key: str) -> dict[str, Any] | None:
        if "run" in state:  # meanwhile worker B took the run over
            AgentRun.objects.filter(pk=state["run"]).update(
                lease_owner="worker-B", lease_expires_at=timezone.now() + dt.timedelta(seconds=30)
            )
        raise ConnectionError("the provider's lookup API is down")

    tool_register(
        ToolSpec(
            name="kpay3",
            description="p",
            args_model=PayArgs,
            tier="write",
            run=downstream.run,
            lookup=lookup,
            takes_key=False,
        )
    )
    spec = pay_agent_register("kpay3")
    try:
        run = run_start(agent=spec.name, input={"amount": 70}, user=alice)
        assert advance.run_advance(run_id=run.id).startswith("retrying")
        state["run"] = run.pk
        outcome = advance.run_advance(run_id=run.id)  # worker A
    finally:
        agent_unregister(spec.name)
        tool_unregister("kpay3")
    run.refresh_from_db()
    assert (run.lease_owner, run.flag) == ("worker-B", ""), outcome


def test_deadline_continuations_and_redeliveries_count_no_failure(settings, alice, queued):
    """Each advance takes one step and continues in a new task ("continuing: advance deadline
    reached"); a second delivery of each task arrives while the lease is live. With a budget
    of one failure, the run still completes and nothing was counted."""
    from agents.runtime import lease

    settings.RUN_ADVANCE_DEADLINE_SECONDS = 0
    settings.RUN_MAX_FAILURES = 1

    def build(*, checkpointer: Any = None) -> Any:
        builder = StateGraph(PayState)
        previous = START
        for name in ("one", "two", "three", "four"):
            builder.add_node(name, lambda state: {})
            builder.add_edge(previous, name)
            previous = name
        builder.add_edge(previous, END)
        return builder.compile(checkpointer=checkpointer)

    agent_register(AgentSpec(name="steps_agent", version="1", factory=build))
    try:
        run = run_start(agent="steps_agent", input={"amount": 1}, user=alice)
        outcomes = []
        for _ in range(6):
            held = lease.lease_acquire(run_id=run.id, owner="busy-worker")
            assert held is not None
            outcomes.append(advance.run_advance(run_id=run.id))  # redelivered meanwhile
            lease.lease_release(run_id=run.id, owner="busy-worker")
            outcomes.append(advance.run_advance(run_id=run.id))
    finally:
        agent_unregister("steps_agent")
    run.refresh_from_db()
    assert "continuing: advance deadline reached" in outcomes
    assert (run.status, run.failure_count) == (AgentRun.Status.COMPLETED, 0), outcomes
