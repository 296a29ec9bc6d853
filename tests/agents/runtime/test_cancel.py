"""A cancelled run stops and compensates the effects it already applied, each exactly once."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel

from agents.effects.ledger import effect_execute
from agents.hitl.gate import approval_gate
from agents.models import Effect
from agents.runtime import advance
from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from agents.services import run_cancel, run_start
from agents.tools import ToolSpec, tool_register
from approvals.models import AgentRun
from approvals.services import approval_decide
from audit.models import AuditEvent

pytestmark = pytest.mark.django_db

LEDGER: list[tuple[str, str]] = []


class StepArgs(BaseModel):
    name: str


def _do(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    LEDGER.append(("do", key))
    return {"done": args["name"]}


def _undo(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    LEDGER.append(("undo", key))
    return {"undone": args["name"]}


class TwoStepState(TypedDict, total=False):
    """Two gated steps; the run can be cancelled while the second waits."""

    first: dict
    second: dict


def _step(name: str):
    def node(state: TwoStepState) -> dict:
        decision = approval_gate(tool="two_step_do", args={"name": name}, rationale=name)
        if decision["decision"] in ("approve", "edit"):
            from langgraph.config import get_config

            thread_id = get_config()["configurable"]["thread_id"]
            effect_execute(
                run_id=thread_id,
                key=f"{thread_id}:{name}",
                tool="two_step_do",
                args=decision["args"],
                approval_id=decision["approval_id"],
            )
        return {name: decision}

    return node


def _build(*, checkpointer: Any) -> Any:
    builder = StateGraph(TwoStepState)
    builder.add_node("first", _step("first"))
    builder.add_node("second", _step("second"))
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    return builder.compile(checkpointer=checkpointer)


@pytest.fixture
def two_step_agent():
    tool_register(
        ToolSpec(
            name="two_step_do",
            description="do",
            args_model=StepArgs,
            tier="write",
            run=_do,
            compensate_with="two_step_undo",
        )
    )
    tool_register(
        ToolSpec(
            name="two_step_undo", description="undo", args_model=StepArgs, tier="write", run=_undo
        )
    )
    LEDGER.clear()
    agent_register(AgentSpec(name="two_step", version="1", factory=_build))
    yield
    agent_unregister("two_step")


def _approve_pending(run: AgentRun, user: Any) -> None:
    approval = run.approvals.get(status="pending")
    approval_decide(
        approval=approval, user=user, decision="approve", seen_hash=approval.payload_hash
    )


def test_cancel_compensates_applied_effects_once(two_step_agent, alice, bob):
    run = run_start(agent="two_step", input={}, user=alice)
    advance.run_advance(run_id=run.id)
    _approve_pending(run, bob)
    assert advance.run_advance(run_id=run.id) == "waiting"  # first applied, second pending
    assert [entry[0] for entry in LEDGER] == ["do"]

    run_cancel(run=AgentRun.objects.get(pk=run.pk), user=alice)
    assert advance.run_advance(run_id=run.id) == "cancelled: 1 effect(s) compensated"
    assert advance.run_advance(run_id=run.id) == "cancelled: 0 effect(s) compensated"

    run.refresh_from_db()
    assert run.status == "cancelled"
    assert [entry[0] for entry in LEDGER] == ["do", "undo"]
    first = Effect.objects.get(key=f"{run.thread_id}:first")
    assert first.status == "compensated"
    assert Effect.objects.get(compensates=first).key == f"{run.thread_id}:first:compensate"
    assert (
        run.approvals.get(interrupt_id=run.approvals.order_by("id").last().interrupt_id).status
        == "expired"
    )
    assert AuditEvent.objects.filter(action="effect.compensated", run_id=run.id).count() == 1
    assert AuditEvent.objects.filter(action="run.cancelled", run_id=run.id).count() == 1


def test_a_decision_on_a_cancelled_run_is_refused(two_step_agent, alice, bob):
    run = run_start(agent="two_step", input={}, user=alice)
    advance.run_advance(run_id=run.id)
    approval = run.approvals.get()
    run_cancel(run=AgentRun.objects.get(pk=run.pk), user=alice)
    from approvals.services import DecisionConflict

    with pytest.raises(DecisionConflict):
        approval_decide(
            approval=approval, user=bob, decision="approve", seen_hash=approval.payload_hash
        )
