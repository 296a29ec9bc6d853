"""The example agent (create_agent + ConsoleGateMiddleware, registered through CONSOLE_AGENTS):
gating comes from the console's tiers and policies, gated tools run once through the ledger."""

from __future__ import annotations

import pytest

from agents.effects.ledger import effect_execute
from agents.models import Effect
from agents.runtime import advance, checkpoint
from agents.runtime.registry import agent_get
from agents.services import run_start
from agents.tools import tool_get
from approvals.models import AgentRun, ApprovalRequest, RiskTier, ToolPolicy
from approvals.services import approval_decide
from examples.helpdesk_agent import crm

pytestmark = pytest.mark.django_db(transaction=True)

CREDIT_AND_CLOSE = (
    "Customer C-42 was charged twice: credit 30 USD. Customer C-7 asks us to close their account."
)


def ask(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def decide(approval: ApprovalRequest, user, decision: str, **kw) -> None:
    approval.refresh_from_db()
    approval_decide(
        approval=approval, user=user, decision=decision, seen_hash=approval.payload_hash, **kw
    )


def tool_call_id(run: AgentRun, tool: str) -> str:
    graph = checkpoint.graph_for(agent_get(run.agent))
    messages = graph.get_state(checkpoint.thread_config(run)).values["messages"]
    calls = [c for m in messages for c in getattr(m, "tool_calls", None) or []]
    return next(c["id"] for c in calls if c["name"] == tool)


def test_the_setting_registers_the_example_agent_and_its_tools(helpdesk):
    spec = agent_get(helpdesk)
    assert spec.name == "helpdesk"
    assert spec.factory.__module__ == "examples.helpdesk_agent.agent"
    assert tool_get("issue_credit").tier == "write"
    assert tool_get("close_account").tier == "critical"
    # The model never sees the idempotency key: it is the ledger's to pass.
    assert "idempotency_key" not in tool_get("issue_credit").args_schema()["properties"]


def test_reads_run_freely_and_each_risky_call_waits_with_an_enriched_payload(helpdesk, alice):
    run = run_start(agent=helpdesk, input=ask(CREDIT_AND_CLOSE), user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    approvals = {a.tool: a for a in run.approvals.all()}
    assert set(approvals) == {"issue_credit", "close_account"}
    credit, close = approvals["issue_credit"], approvals["close_account"]
    assert (credit.tier, close.tier) == ("write", "critical")
    assert credit.args == {"customer_id": "C-42", "amount": 30, "reason": "charged twice"}
    assert credit.payload["blast_radius"] == "Credits 30 USD to customer C-42"
    assert "cannot be reopened" in close.payload["blast_radius"]
    assert "C-42 asks for 30 USD back" in credit.payload["rationale"]
    evidence = credit.payload["evidence"]
    assert any(item.startswith("lookup_customer:") and "Ada Lovelace" in item for item in evidence)
    assert credit.payload["args_schema"]["required"] == ["customer_id", "amount", "reason"]
    assert not Effect.objects.exists()
    assert crm.CUSTOMERS["C-42"]["balance"] == 0


def test_approved_calls_run_once_through_the_ledger_with_the_approved_args(helpdesk, alice, bob):
    run = run_start(agent=helpdesk, input=ask(CREDIT_AND_CLOSE), user=alice)
    advance.run_advance(run_id=run.id)
    credit = run.approvals.get(tool="issue_credit")
    close = run.approvals.get(tool="close_account")

    decide(
        credit, bob, "edit", args={"customer_id": "C-42", "amount": 25, "reason": "charged twice"}
    )
    assert advance.run_advance(run_id=run.id) == "waiting"
    effect = Effect.objects.get(tool="issue_credit")
    assert effect.key == f"{run.thread_id}:{tool_call_id(run, 'issue_credit')}"
    assert effect.status == Effect.Status.SUCCEEDED
    assert effect.approval_id == credit.id
    assert effect.args == {"customer_id": "C-42", "amount": 25, "reason": "charged twice"}
    assert crm.CUSTOMERS["C-42"]["balance"] == 25

    # A replay of the same call (same key, same args) returns the stored result, once.
    again = effect_execute(
        run_id=run.thread_id,
        key=effect.key,
        tool="issue_credit",
        args=effect.args,
        approval_id=credit.id,
    )
    assert again == effect.result
    assert crm.CUSTOMERS["C-42"]["balance"] == 25

    decide(close, bob, "reject", message="Retention wants to call them first.")
    assert advance.run_advance(run_id=run.id) == "completed"
    assert crm.CUSTOMERS["C-7"]["status"] == "open"
    assert not Effect.objects.filter(tool="close_account").exists()
    run.refresh_from_db()
    final = run.output["messages"][-1]["content"]
    assert "Retention wants to call them first." in final
    assert '"credited": 25' in final


def test_a_tool_policy_gates_a_read_tool_without_touching_the_agent(helpdesk, alice, bob):
    write = RiskTier.objects.create(name="write", level=1, requires_approval=True)
    ToolPolicy.objects.create(tool="lookup_customer", tier=write)
    run = run_start(agent=helpdesk, input=ask("What plan is C-42 on?"), user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    lookup = run.approvals.get()
    assert (lookup.tool, lookup.tier) == ("lookup_customer", "write")
    decide(lookup, bob, "approve")
    assert advance.run_advance(run_id=run.id) == "completed"
    run.refresh_from_db()
    assert run.status == AgentRun.Status.COMPLETED


def test_a_tier_that_needs_no_approval_runs_the_call_at_once_still_through_the_ledger(
    helpdesk, alice
):
    RiskTier.objects.create(name="write", level=1, requires_approval=False)
    run = run_start(agent=helpdesk, input=ask("Credit C-42 10 USD, charged twice."), user=alice)
    assert advance.run_advance(run_id=run.id) == "completed"
    assert not run.approvals.exists()
    effect = Effect.objects.get(tool="issue_credit")
    assert effect.approval_id is None and effect.status == Effect.Status.SUCCEEDED
    assert crm.CUSTOMERS["C-42"]["balance"] == 10
