"""Re-check at execution: the policy is evaluated again for the final args before the effect."""

from __future__ import annotations

import datetime as dt
from typing import Any, TypedDict

import pytest
from django.utils import timezone
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from agents.effects.errors import EffectTierRose
from agents.effects.ledger import effect_execute
from agents.hitl.gate import approval_gate
from agents.models import Effect
from approvals.models import ApprovalRequest, ToolPolicy
from audit.models import AuditEvent
from core.sealed_fields import field_seal
from tests.support.approvals import request_approval

REFUND = {
    "order_id": "A-7",
    "amount": "120.00",
    "reason": "damaged",
    "sku": "MUG-BLUE",
    "quantity": 1,
    "customer_email": "pat@example.com",
    "currency": "USD",
}
REQUESTED_AT = "2030-01-01T10:00:00+00:00"


class GateState(TypedDict, total=False):
    args: dict[str, Any]
    decision: dict[str, Any]


def _gate_node(state: GateState) -> dict[str, Any]:
    return {
        "decision": approval_gate(
            tool="refund_order", args=state["args"], rationale="refund", requested_at=REQUESTED_AT
        )
    }


@pytest.fixture
def graph():
    builder = StateGraph(GateState)
    builder.add_node("gate", _gate_node)
    builder.add_edge(START, "gate")
    builder.add_edge("gate", END)
    return builder.compile(checkpointer=InMemorySaver())


CONFIG = {"configurable": {"thread_id": "recheck-thread"}}


def _resume(graph, interrupt, **value: Any) -> None:
    value = {"message": "", "approval_id": None, **value}
    graph.invoke(Command(resume={interrupt.id: value}), CONFIG, durability="sync")


def test_an_edit_that_raises_the_tier_asks_again_at_the_higher_tier_before_anything_runs(
    demo_policy, graph
):
    graph.invoke({"args": REFUND}, CONFIG, durability="sync")
    (first,) = graph.get_state(CONFIG).interrupts
    assert first.value["tier"] == "write"
    decided_at = timezone.now().isoformat()

    edited = {**REFUND, "amount": "900.00"}
    _resume(
        graph,
        first,
        decision="edit",
        args=edited,
        by="carol",
        approval_id=1,
        tier="write",
        decided_at=decided_at,
    )

    state = graph.get_state(CONFIG)
    assert "decision" not in state.values  # the node did not finish: nothing ran
    (second,) = state.interrupts
    assert second.id != first.id
    assert second.value["tier"] == "critical"
    assert second.value["args"]["amount"] == "900.00"
    assert second.value["recheck"] == {
        "approval_id": 1,
        "from_tier": "write",
        "decided_by": "carol",
    }
    # The new approval's time to live starts at the decision, not at the first request.
    expires = dt.datetime.fromisoformat(second.value["expires_at"])
    assert expires == dt.datetime.fromisoformat(decided_at) + dt.timedelta(minutes=15)

    _resume(graph, second, decision="approve", by="bob, carol", approval_id=2, tier="critical")

    decision = graph.get_state(CONFIG).values["decision"]
    assert (decision["decision"], decision["approval_id"]) == ("approve", 2)
    assert decision["args"]["amount"] == "900.00"
    assert decision["tier"] == "critical"


def test_a_policy_change_after_the_request_is_caught_at_execution(demo_policy, graph):
    ToolPolicy.objects.get(tool="refund_order").rules.all().delete()
    graph.invoke({"args": {**REFUND, "amount": "600.00"}}, CONFIG, durability="sync")
    (first,) = graph.get_state(CONFIG).interrupts
    assert first.value["tier"] == "write"

    from django.core.management import call_command

    call_command("seed_demo", verbosity=0)  # puts the amount > 500 -> critical rule back
    _resume(graph, first, decision="approve", args={}, by="bob", approval_id=1, tier="write")

    (second,) = graph.get_state(CONFIG).interrupts
    assert second.value["tier"] == "critical"


def test_a_decision_in_the_same_tier_runs_without_asking_again(demo_policy, graph):
    graph.invoke({"args": REFUND}, CONFIG, durability="sync")
    (first,) = graph.get_state(CONFIG).interrupts

    edited = {**REFUND, "amount": "80.00"}
    _resume(graph, first, decision="edit", args=edited, by="bob", approval_id=1, tier="write")

    state = graph.get_state(CONFIG)
    assert not state.interrupts
    assert state.values["decision"]["args"]["amount"] == "80.00"


def test_the_new_approval_request_is_audited_as_a_recheck(demo_policy, alice):
    approval = request_approval(
        requester=alice,
        tier="critical",
        extra_payload={"recheck": {"approval_id": 41, "from_tier": "write", "decided_by": "carol"}},
    )

    event = AuditEvent.objects.get(action="approval.rechecked", approval_id=approval.id)
    assert event.data["from_tier"] == "write"
    assert event.data["to_tier"] == "critical"
    assert event.data["approval_id"] == 41


def test_the_ledger_refuses_an_effect_whose_approved_args_now_need_a_higher_tier(
    demo_policy, alice
):
    approval = request_approval(requester=alice, tier="write", args=REFUND)
    edited = {**REFUND, "amount": "900.00"}
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        status=ApprovalRequest.Status.EDITED,
        decision=field_seal(  # an update() takes only sealed values
            ApprovalRequest,
            "decision",
            approval.run_id,
            {"decision": "edit", "args": edited, "by": "carol", "tier": "write"},
        ),
    )

    with pytest.raises(EffectTierRose, match="tier critical"):
        effect_execute(
            run_id=str(approval.run_id),
            key=f"{approval.run_id}:call-1",
            tool="refund_order",
            args=edited,
            approval_id=approval.pk,
        )

    assert not Effect.objects.exists()
