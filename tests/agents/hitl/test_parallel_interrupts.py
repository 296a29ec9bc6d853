"""Parallel interrupts from Send branches are answered one at a time; unknown payloads are
shown raw and answered with a response."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from agents.runtime import advance, checkpoint
from agents.runtime.registry import agent_get
from agents.services import run_start
from approvals.models import AgentRun, ApprovalRequest
from approvals.services import approval_decide
from audit.models import AuditEvent
from audit.private import event_data_open
from tests.support.agents import DELETED, build_fan_graph, build_question_graph

pytestmark = pytest.mark.django_db(transaction=True)

PATHS = ["/tmp/a.log", "/tmp/b.log", "/tmp/c.log"]


def decide(approval: ApprovalRequest, user, decision: str, **kw) -> None:
    approval.refresh_from_db()
    approval_decide(
        approval=approval, user=user, decision=decision, seen_hash=approval.payload_hash, **kw
    )


def state(run: AgentRun):
    graph = checkpoint.graph_for(agent_get(run.agent))
    return graph.get_state(checkpoint.thread_config(run))


def test_each_send_branch_gets_its_own_approval(graph_agent, alice):
    agent = graph_agent("fan_review", build_fan_graph)
    run = run_start(agent=agent, input={"paths": PATHS}, user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    approvals = list(run.approvals.order_by("id"))
    assert sorted(a.args["path"] for a in approvals) == PATHS
    assert len({a.interrupt_id for a in approvals}) == 3
    assert {a.interrupt_id for a in approvals} == {i.id for i in state(run).interrupts}


def test_partial_then_full_answers_resume_only_the_answered_branches(graph_agent, alice, bob):
    agent = graph_agent("fan_review", build_fan_graph)
    run = run_start(agent=agent, input={"paths": PATHS}, user=alice)
    advance.run_advance(run_id=run.id)
    by_path = {a.args["path"]: a for a in run.approvals.all()}

    decide(by_path["/tmp/b.log"], bob, "approve")
    assert advance.run_advance(run_id=run.id) == "waiting"
    assert DELETED == ["/tmp/b.log"]
    pending = {i.id for i in state(run).interrupts}
    assert pending == {by_path["/tmp/a.log"].interrupt_id, by_path["/tmp/c.log"].interrupt_id}
    # The waiting branches kept their approvals: nothing was asked twice.
    assert run.approvals.count() == 3
    assert AuditEvent.objects.filter(action="approval.requested", run_id=run.id).count() == 3
    run.refresh_from_db()
    assert run.status == AgentRun.Status.WAITING

    decide(by_path["/tmp/a.log"], bob, "reject", message="still needed")
    decide(by_path["/tmp/c.log"], bob, "approve")
    assert advance.run_advance(run_id=run.id) == "completed"
    assert sorted(DELETED) == ["/tmp/b.log", "/tmp/c.log"]
    run.refresh_from_db()
    assert sorted(run.output["outcome"]) == [
        "/tmp/a.log:reject",
        "/tmp/b.log:approve",
        "/tmp/c.log:approve",
    ]
    assert run.resume_count == 2


def test_an_unknown_payload_is_kept_whole_and_answered_with_a_response(
    graph_agent, alice, bob, client
):
    agent = graph_agent("question", build_question_graph)
    run = run_start(agent=agent, input={}, user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    approval = run.approvals.get()
    assert approval.payload == {"question": "<script>alert(1)</script> Which region?"}
    assert approval.allowed_decisions == ["respond"]

    client.force_login(bob)
    page = client.get(reverse("approvals:detail", args=[approval.pk])).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt; Which region?" in page
    assert "<script>alert(1)" not in page
    assert 'id="decide-respond"' in page
    assert 'id="decide-approve"' not in page

    decide(approval, bob, "respond", message="eu-west-1")
    assert advance.run_advance(run_id=run.id) == "completed"
    run.refresh_from_db()
    assert run.output == {"answer": "eu-west-1"}
    requested = AuditEvent.objects.get(action="approval.requested", approval_id=approval.id)
    assert json.dumps(event_data_open(requested)["payload"]) == json.dumps(approval.payload)
