"""policy_read_once (one policy reading per advance) must not blind the ledger's check at
execution: a policy tightened during an advance still refuses the effect (EffectTierRose)."""

from __future__ import annotations

import time

import pytest

from agents.effects.errors import EffectTierRose
from agents.effects.ledger import effect_execute
from agents.models import Effect
from approvals import policy
from approvals.models import ApprovalRequest, RiskTier, ToolPolicy
from approvals.services.policy import policy_change_record
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


def _later(monkeypatch, seconds: float) -> None:
    """The advance goes on: ``seconds`` pass on the monotonic clock."""
    now = time.monotonic() + seconds
    monkeypatch.setattr(time, "monotonic", lambda: now)


def test_a_policy_raised_during_an_advance_still_refuses_the_effect_at_execution(
    demo_policy, alice, monkeypatch
):
    approval = request_approval(requester=alice, tier="write", args=REFUND)
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        status=ApprovalRequest.Status.APPROVED,
        decision=field_seal(  # an update() takes only sealed values
            ApprovalRequest,
            "decision",
            approval.run_id,
            {"decision": "approve", "args": None, "by": "bob", "tier": "write"},
        ),
    )
    with policy.policy_read_once():  # as run_advance holds it around the whole advance
        # The gate asks first (the advance's first reading of the policy).
        assert (
            policy.tier_for_call(tool="refund_order", args=REFUND, default_tier="write") == "write"
        )
        # Meanwhile an admin moves refund_order to critical (committed, version bumped).
        tool_policy = ToolPolicy.objects.get(tool="refund_order")
        tool_policy.rules.all().delete()
        tool_policy.tier = RiskTier.objects.get(name="critical")
        tool_policy.save()
        policy_change_record(obj=tool_policy, change="changed", actor="system:test")
        _later(monkeypatch, 2 * policy.FRESH_SECONDS)  # an LLM step or two later

        with pytest.raises(EffectTierRose, match="tier critical"):
            effect_execute(
                run_id=str(approval.run_id),
                key=f"{approval.run_id}:call-1",
                tool="refund_order",
                args=REFUND,
                approval_id=approval.pk,
            )

    assert not Effect.objects.exists()


def _tool_policy_tier(tool: str, tier: str) -> None:
    tool_policy = ToolPolicy.objects.get(tool=tool)
    tool_policy.rules.all().delete()
    tool_policy.tier = RiskTier.objects.get(name=tier)
    tool_policy.save()
    policy_change_record(obj=tool_policy, change="changed", actor="system:test")


def test_a_call_is_not_auto_approved_after_its_tool_was_raised_during_the_advance(
    demo_policy, monkeypatch
):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    from agents.hitl.gate import approval_gate

    class State(TypedDict, total=False):
        args: dict
        decision: dict

    def gate(state: State) -> dict:
        return {"decision": approval_gate(tool="refund_order", args=state["args"], rationale="r")}

    builder = StateGraph(State)
    builder.add_node("gate", gate)
    builder.add_edge(START, "gate")
    builder.add_edge("gate", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "read-once-auto"}}

    _tool_policy_tier("refund_order", "read")  # refunds run without asking, for now
    with policy.policy_read_once():  # as run_advance holds it around the whole advance
        # An earlier step of the advance read the policy (refund_order: read, no approval).
        assert policy.tier_for_call(tool="refund_order", args=REFUND, default_tier="write") == (
            "read"
        )
        # Meanwhile an admin decides refunds need a person (committed, version bumped).
        _tool_policy_tier("refund_order", "critical")
        _later(monkeypatch, 2 * policy.FRESH_SECONDS)  # an LLM step or two later

        graph.invoke({"args": REFUND}, config, durability="sync")

    state = graph.get_state(config)
    assert "decision" not in state.values  # not auto-approved under the policy it replaced
    (asked,) = state.interrupts
    assert asked.value["tier"] == "critical"
