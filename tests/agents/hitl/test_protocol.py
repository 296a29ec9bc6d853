"""Agents using LangChain's own HumanInTheLoopMiddleware work in the console unchanged."""

from __future__ import annotations

import pytest
from django.urls import reverse
from langchain_core.messages import ToolMessage

from agents.runtime import advance, checkpoint
from agents.runtime.registry import agent_get
from agents.services import run_start
from approvals.models import AgentRun, ApprovalRequest
from approvals.services import DecisionInvalid, approval_decide
from tests.support.agents import DELETED, SENT

pytestmark = pytest.mark.django_db(transaction=True)

REQUEST = {"messages": [{"role": "user", "content": "Email Alice the report, then delete it."}]}


def start(agent: str, user) -> AgentRun:
    run = run_start(agent=agent, input=REQUEST, user=user)
    assert advance.run_advance(run_id=run.id) == "waiting"
    return run


def decide(approval: ApprovalRequest, user, decision: str, **kw) -> ApprovalRequest:
    approval.refresh_from_db()
    return approval_decide(
        approval=approval, user=user, decision=decision, seen_hash=approval.payload_hash, **kw
    )


def pending_interrupt_ids(run: AgentRun) -> set[str]:
    graph = checkpoint.graph_for(agent_get(run.agent))
    return {i.id for i in graph.get_state(checkpoint.thread_config(run)).interrupts}


def tool_messages(run: AgentRun) -> dict[str, ToolMessage]:
    graph = checkpoint.graph_for(agent_get(run.agent))
    messages = graph.get_state(checkpoint.thread_config(run)).values["messages"]
    return {m.name: m for m in messages if isinstance(m, ToolMessage)}


# --- batched: one HITLRequest, one approval per action request ------------------------------


def test_a_batched_request_becomes_one_approval_per_action(hitl_agent, alice):
    run = start(hitl_agent("batched"), alice)
    email, delete = run.approvals.order_by("action_index")
    assert email.interrupt_id == delete.interrupt_id
    assert (email.action_index, delete.action_index) == (0, 1)
    assert (email.tool, delete.tool) == ("send_email", "delete_file")
    assert email.args == {"to": "alice@example.com", "body": "Report attached"}
    assert email.allowed_decisions == ["approve", "edit", "reject", "respond"]
    assert delete.allowed_decisions == ["approve", "reject"]
    assert email.tier == delete.tier == "write"
    assert email.payload["protocol"] == "langchain.hitl"
    assert email.payload["mode"] == "batched"
    assert "Tool: send_email" in email.payload["rationale"]


def test_a_batched_request_resumes_only_once_every_action_is_decided(hitl_agent, alice, bob):
    run = start(hitl_agent("batched"), alice)
    email, delete = run.approvals.order_by("action_index")
    decide(email, bob, "edit", args={"to": "alice@example.com", "body": "Q3 report attached"})

    assert advance.run_advance(run_id=run.id) == "waiting"
    assert pending_interrupt_ids(run) == {email.interrupt_id}
    assert SENT == [] and DELETED == []

    decide(delete, bob, "reject", message="Keep the report for the audit.")
    assert advance.run_advance(run_id=run.id) == "completed"
    # The decisions reached the agent in their order: the edit ran, the reject did not.
    assert SENT == [{"to": "alice@example.com", "body": "Q3 report attached"}]
    assert DELETED == []
    results = tool_messages(run)
    assert "Keep the report for the audit." in results["delete_file"].content
    assert results["delete_file"].status == "error"
    assert "human reviewer replaced this tool call" in results["send_email"].content
    assert run.approvals.count() == 2


def test_a_batched_approval_refuses_a_decision_its_review_config_does_not_allow(
    hitl_agent, alice, bob
):
    run = start(hitl_agent("batched"), alice)
    delete = run.approvals.get(action_index=1)
    with pytest.raises(DecisionInvalid):
        decide(delete, bob, "respond", message="deleted it by hand")


# --- per call: one ToolApprovalRequest per gated tool call ----------------------------------


def test_per_call_requests_become_one_approval_per_interrupt(hitl_agent, alice):
    run = start(hitl_agent("per_call"), alice)
    approvals = {a.tool: a for a in run.approvals.all()}
    email, delete = approvals["send_email"], approvals["delete_file"]
    assert email.interrupt_id != delete.interrupt_id
    assert pending_interrupt_ids(run) == {email.interrupt_id, delete.interrupt_id}
    assert email.payload["mode"] == "per_call"
    assert email.payload["tool_call_id"].startswith("call_")
    # The interrupt's response_schema sets what each approval accepts.
    assert delete.allowed_decisions == ["approve", "reject"]
    assert email.allowed_decisions == ["approve", "edit", "reject", "respond"]
    assert email.payload["args_schema"]["required"] == ["to", "body"]
    assert "args_schema" not in delete.payload


def test_a_per_call_edit_must_match_the_response_schema(hitl_agent, alice, bob):
    run = start(hitl_agent("per_call"), alice)
    email = run.approvals.get(tool="send_email")
    with pytest.raises(DecisionInvalid) as exc:
        decide(email, bob, "edit", args={"to": "alice@example.com", "body": 42})
    assert "args.body" in exc.value.errors


def test_per_call_answers_resume_each_call_on_its_own(hitl_agent, alice, bob):
    run = start(hitl_agent("per_call"), alice)
    email = run.approvals.get(tool="send_email")
    delete = run.approvals.get(tool="delete_file")

    decide(delete, bob, "approve")
    assert advance.run_advance(run_id=run.id) == "waiting"
    assert DELETED == ["/reports/q3.pdf"]
    assert SENT == []
    assert pending_interrupt_ids(run) == {email.interrupt_id}
    assert run.approvals.count() == 2

    decide(email, bob, "respond", message="Alice already has it.")
    assert advance.run_advance(run_id=run.id) == "completed"
    assert SENT == []
    assert DELETED == ["/reports/q3.pdf"]
    results = tool_messages(run)
    assert results["send_email"].content == "Alice already has it."
    assert results["send_email"].status == "success"
    assert results["delete_file"].content == "deleted /reports/q3.pdf"


def test_the_approval_page_offers_what_the_review_config_allows(hitl_agent, alice, bob, client):
    run = start(hitl_agent("batched"), alice)
    email, delete = run.approvals.order_by("action_index")
    client.force_login(bob)

    page = client.get(reverse("approvals:detail", args=[email.pk])).content.decode()
    assert "alice@example.com" in page
    assert 'id="edit-form"' in page and 'id="decide-respond"' in page

    page = client.get(reverse("approvals:detail", args=[delete.pk])).content.decode()
    assert "/reports/q3.pdf" in page
    assert 'id="decide-approve"' in page and 'id="decide-reject"' in page
    assert 'id="edit-form"' not in page and 'id="decide-respond"' not in page
