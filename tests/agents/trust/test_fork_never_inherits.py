"""No fork, nor a fork of a fork, inherits a decided gate: in a subgraph, or in a saga."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph

from agents.effects.ledger import effect_execute
from agents.models import Effect
from agents.runtime import advance
from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from agents.services import run_start
from approvals.models import AgentRun

pytestmark = pytest.mark.django_db(transaction=True)


class GateState(TypedDict, total=False):
    topic: str
    decision: dict
    done: dict


def _subgraph_gate_agent() -> AgentSpec:
    """The gate sits in a subgraph; the decision comes back in the parent's state and the
    parent's next node acts on it through the ledger."""
    from agents.hitl.gate import approval_gate

    def ask(state: GateState) -> dict[str, Any]:
        return {
            "decision": approval_gate(
                tool="write_note", args={"text": state["topic"], "count": 1}, rationale="r"
            )
        }

    def act(state: GateState) -> dict[str, Any]:
        decision = state["decision"]
        if decision["decision"] not in ("approve", "edit"):
            return {"done": {}}
        thread_id = get_config()["configurable"]["thread_id"]
        return {
            "done": effect_execute(
                run_id=thread_id,
                key=f"{thread_id}:note",
                tool="write_note",
                args=decision["args"],
                approval_id=decision["approval_id"],
            )
        }

    def build(*, checkpointer: Any = None) -> Any:
        inner = StateGraph(GateState)
        inner.add_node("ask", ask)
        inner.add_edge(START, "ask")
        inner.add_edge("ask", END)
        outer = StateGraph(GateState)
        outer.add_node("gate", inner.compile())
        outer.add_node("act", act)
        outer.add_edge(START, "gate")
        outer.add_edge("gate", "act")
        outer.add_edge("act", END)
        return outer.compile(checkpointer=checkpointer)

    return agent_register(AgentSpec(name="subgate_agent", version="1", factory=build))


def _fork_everywhere(run: AgentRun, user: Any) -> list[str]:
    """Fork from every step of the run (and from every step of each fork), advance each
    child as far as it goes; returns what each child did."""
    from agents import selectors, services

    outcomes = []
    for step in selectors.run_history(run=run):
        try:
            child = services.run_fork(run=run, checkpoint_id=step["checkpoint_id"], user=user)
        except services.ForkRefused:
            continue
        outcomes.append(advance.run_advance(run_id=child.id))
        for grandstep in selectors.run_history(run=child):
            try:
                grandchild = services.run_fork(
                    run=child, checkpoint_id=grandstep["checkpoint_id"], user=user
                )
            except services.ForkRefused:
                continue
            outcomes.append(advance.run_advance(run_id=grandchild.id))
    return outcomes


def test_no_fork_or_fork_of_a_fork_inherits_a_decision_made_in_a_subgraph(
    note_agent, alice, bob, carol, queued
):
    from approvals.services import approval_decide
    from tests.support.agents import CALLS

    _subgraph_gate_agent()
    try:
        run = run_start(agent="subgate_agent", input={"topic": "disk"}, user=alice)
        assert advance.run_advance(run_id=run.id) == "waiting"
        approval = run.approvals.get()
        approval_decide(
            approval=approval, user=bob, decision="approve", seen_hash=approval.payload_hash
        )
        assert advance.run_advance(run_id=run.id) == "completed"
        outcomes = _fork_everywhere(run, carol)
    finally:
        agent_unregister("subgate_agent")
    assert len(CALLS) == 1 and Effect.objects.filter(tool="write_note").count() == 1
    assert outcomes and set(outcomes) == {"waiting"}, outcomes


def test_no_fork_of_a_refund_inherits_its_approved_saga(alice, bob, carol, queued):
    from agents.models import SandboxPayment
    from agents.runtime.registry import agent_get
    from approvals.services import approval_decide

    spec = agent_get("refund_agent")
    run = run_start(agent="refund_agent", input=spec.example_input, user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    approval = run.approvals.get()
    approval_decide(
        approval=approval, user=bob, decision="approve", seen_hash=approval.payload_hash
    )
    assert advance.run_advance(run_id=run.id) == "completed"
    assert SandboxPayment.objects.count() == 1
    outcomes = _fork_everywhere(run, carol)
    assert SandboxPayment.objects.count() == 1, outcomes
    assert outcomes and set(outcomes) == {"waiting"}, outcomes  # each fork asks again
