"""A one-node agent whose only step pays through the ledger, providers that answer lookups
and act late, and helpers to drive runs as the workers would (trust tests)."""

from __future__ import annotations

import datetime as dt
from typing import Any, TypedDict

from django.utils import timezone
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph

from agents.effects.errors import ToolTimeout
from agents.effects.ledger import effect_execute
from agents.models import Effect
from agents.runtime import advance
from agents.runtime.registry import AgentSpec, agent_register
from approvals.models import AgentRun
from audit.canonical import payload_hash
from tests.support.providers import WorkerKilled
from tests.support.queue import tasks_named

ADVANCE_TASK = "agents.tasks.run_advance"


class PayState(TypedDict, total=False):
    amount: int
    paid: dict


def pay_agent_register(tool: str) -> AgentSpec:
    def pay(state: PayState) -> dict[str, Any]:
        thread_id = get_config()["configurable"]["thread_id"]
        return {
            "paid": effect_execute(
                run_id=thread_id,
                key=f"{thread_id}:pay",
                tool=tool,
                args={"amount": state["amount"]},
            )
        }

    def build(*, checkpointer: Any = None) -> Any:
        builder = StateGraph(PayState)
        builder.add_node("pay", pay)
        builder.add_edge(START, "pay")
        builder.add_edge("pay", END)
        return builder.compile(checkpointer=checkpointer)

    return agent_register(AgentSpec(name=f"{tool}_agent", version="1", factory=build))


class LateProvider:
    """Dedupes on the key and answers lookups; ``land(key)`` makes a call that timed out act
    late (the request was in flight when the console stopped waiting)."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}
        self.undone: list[str] = []
        self.script: list[str] = []

    def run(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        step = self.script.pop(0) if self.script else "ok"
        if step == "timeout":
            raise ToolTimeout("no answer yet")
        if step == "killed":
            raise WorkerKilled()
        return self.records.setdefault(key, {"paid": args["amount"]})

    def land(self, key: str, amount: int) -> None:
        self.records.setdefault(key, {"paid": amount})

    def lookup(self, key: str) -> dict[str, Any] | None:
        return self.records.get(key)

    def undo(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        self.undone.append(key)
        return {"reversed": args["amount"]}


def advances_drain(queued) -> list[str]:
    """Run every advance the code enqueued (what the workers would do), until none is left."""
    outcomes = []
    while True:
        pending = tasks_named(queued, ADVANCE_TASK)
        queued.reset_mock()
        if not pending:
            return outcomes
        for _name, run_id, *_rest in pending:
            outcomes.append(advance.run_advance(run_id=run_id))


def escalated_effect(run: AgentRun, *, tool: str, args: dict[str, Any]) -> Effect:
    """An effect in doubt that the console handed to a person."""
    return Effect.objects.create(
        key=f"{run.thread_id}:{tool}",
        run=run,
        tool=tool,
        args=args,
        args_fingerprint=payload_hash(args),
        status=Effect.Status.IN_DOUBT,
        escalated_at=timezone.now(),
    )


def die_mid_step(run: AgentRun) -> None:
    """What a killed worker leaves: the run "running" under a lease that lapsed."""
    AgentRun.objects.filter(pk=run.pk).update(
        status=AgentRun.Status.RUNNING,
        lease_owner="a-killed-worker",
        lease_expires_at=timezone.now() - dt.timedelta(seconds=1),
    )
