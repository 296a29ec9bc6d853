"""The console's policy holds for remote approvals as for in-process ones: four eyes, quorum by
tier, tier by edit, expiry with the tier's default, payload-hash binding."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from agents.hitl.protocol import UNKNOWN_TOOL
from agents.remote.errors import RemoteToolForbidden
from agents.remote.models import RemoteRequest
from agents.runtime import advance
from approvals.models import AgentRun, ApprovalRequest, RiskTier
from approvals.services import DecisionConflict, DecisionForbidden, approval_expire
from audit.models import AuditEvent
from tests.agents.remote.conftest import make_agent
from tests.agents.remote.helpers import console_payload, hitl, open_request, refund
from tests.support.approvals import decide


def closed(remote: RemoteRequest) -> RemoteRequest:
    advance.run_advance(run_id=remote.run_id)
    return RemoteRequest.objects.get(pk=remote.pk)


def test_the_agents_service_user_is_the_requester_and_can_never_decide(demo_policy, agent):
    remote, [approval] = open_request(agent)
    run = AgentRun.objects.get(pk=remote.run_id)
    assert run.requested_by_id == agent.user_id
    assert not agent.user.has_usable_password() and not agent.user.is_staff
    assert list(agent.user.groups.all()) == []
    with pytest.raises(DecisionForbidden):
        decide(approval, agent.user)


def test_a_console_payload_claiming_tier_read_gets_the_policys_tier(demo_policy, agent):
    remote, [approval] = open_request(agent, console_payload(tier="read"))
    assert approval.tier == "critical"  # refund_order over 500 (the demo policy's rule)
    assert approval.payload["tier"] == "critical"
    ttl = (approval.expires_at - approval.created_at).total_seconds()
    assert 15 * 60 - 5 < ttl <= 15 * 60 + 5  # the critical tier's own expiry


def test_a_console_payload_cannot_set_its_own_expiry(demo_policy, agent):
    far = (timezone.now() + dt.timedelta(days=30)).isoformat()
    _, [approval] = open_request(agent, {**console_payload(), "expires_at": far})
    assert approval.expires_at < timezone.now() + dt.timedelta(hours=1)


def test_critical_needs_two_approvers_before_the_agent_hears_anything(
    demo_policy, agent, bob, carol
):
    remote, [approval] = open_request(agent, console_payload(**refund(900, "o-9")))
    decide(approval, bob)
    assert closed(remote).status == RemoteRequest.Status.PENDING
    assert AgentRun.objects.get(pk=remote.run_id).status == AgentRun.Status.WAITING

    decide(approval, carol)
    remote = closed(remote)
    assert remote.status == RemoteRequest.Status.DECIDED
    assert remote.resume["decision"] == "approve"
    assert remote.resume["by"] == "bob, carol"


def test_an_edit_that_raises_the_tier_moves_the_approval_and_changes_its_hash(
    demo_policy, agent, bob, carol
):
    remote, [approval] = open_request(agent, hitl(**refund(20)))
    assert approval.tier == "write"
    decide(approval, carol, "edit", args=refund(900))
    moved = ApprovalRequest.objects.get(pk=approval.pk)
    assert moved.tier == "critical"
    assert moved.payload_hash != approval.payload_hash
    assert moved.status == ApprovalRequest.Status.PENDING
    # A vote on the hash the reviewer saw before the edit is stale.
    with pytest.raises(DecisionConflict) as exc:
        decide(moved, bob, seen_hash=approval.payload_hash)
    assert exc.value.reason == "hash_mismatch" and exc.value.status_code == 409
    assert closed(remote).status == RemoteRequest.Status.PENDING


def test_an_edit_reaches_the_agent_in_its_protocol(demo_policy, agent, bob):
    remote, [approval] = open_request(agent, hitl(**refund(20)))
    decide(approval, bob, "edit", args=refund(15))
    remote = closed(remote)
    assert remote.resume == {
        "decisions": [
            {
                "type": "edit",
                "edited_action": {
                    "name": "refund_order",
                    "args": refund(15),
                },
            }
        ]
    }


def test_expiry_applies_the_tiers_default_and_reaches_the_agent_as_its_resume_value(
    demo_policy, agent
):
    remote, [approval] = open_request(agent)
    later = approval.expires_at + dt.timedelta(seconds=1)
    assert approval_expire(approval_id=approval.pk, now=later)
    remote = closed(remote)
    assert remote.status == RemoteRequest.Status.DECIDED
    assert remote.resume["decisions"][0]["type"] == "reject"  # the write tier's default
    stored = ApprovalRequest.objects.get(pk=approval.pk)
    assert stored.status == ApprovalRequest.Status.EXPIRED
    assert stored.decision["by"] == "system:timeout"


def test_a_tool_approval_request_is_answered_with_a_single_decision(demo_policy, agent, bob):
    value = {
        "type": "tool_approval",
        "name": "refund_order",
        "args": {"order_id": "o-1", "amount": 10},
    }
    remote, [approval] = open_request(agent, value)
    assert remote.protocol == "tool_approval"
    decide(approval, bob, "reject", message="no")
    assert closed(remote).resume == {"type": "reject", "message": "no"}


def test_a_batch_waits_for_every_action_and_answers_in_order(demo_policy, agent, bob):
    value = {
        "action_requests": [
            {"name": "refund_order", "args": {"order_id": "a", "amount": 1}},
            {"name": "refund_order", "args": {"order_id": "b", "amount": 2}},
        ],
        "review_configs": [
            {"action_name": "refund_order", "allowed_decisions": ["approve", "reject"]}
        ],
    }
    remote, approvals = open_request(agent, value)
    assert [a.action_index for a in approvals] == [0, 1]
    decide(approvals[1], bob, "reject")
    assert closed(remote).status == RemoteRequest.Status.PENDING
    decide(approvals[0], bob)
    assert closed(remote).resume == {"decisions": [{"type": "approve"}, {"type": "reject"}]}


def test_a_second_interrupt_of_the_thread_reuses_its_run_and_makes_it_wait_again(
    demo_policy, agent, bob
):
    first, [approval] = open_request(agent)
    decide(approval, bob)
    closed(first)
    assert AgentRun.objects.get(pk=first.run_id).status == AgentRun.Status.RUNNING

    second, _ = open_request(agent, hitl(**refund(3, "o-2")), interrupt_id="i-2")
    assert second.run_id == first.run_id
    assert AgentRun.objects.get(pk=first.run_id).status == AgentRun.Status.WAITING


def test_every_step_is_audited(demo_policy, agent, bob):
    remote, [approval] = open_request(agent)
    decide(approval, bob)
    closed(remote)
    actions = list(
        AuditEvent.objects.filter(run_id=remote.run_id)
        .order_by("seq")
        .values_list("action", flat=True)
    )
    assert actions[:4] == ["run.created", "approval.requested", "run.waiting", "remote.requested"]
    assert "approval.decided" in actions and "remote.decided" in actions


def test_a_console_payload_naming_the_agent_question_tool_needs_it_in_the_agents_tools(
    demo_policy,
):
    agent = make_agent(tools=["refund_order"])
    for value in (
        {"type": "console.approval", "tool": UNKNOWN_TOOL, "args": refund(5000)},
        {"type": "console.approval", "args": refund(5000)},  # no tool: the same
        hitl(name=UNKNOWN_TOOL),
    ):
        with pytest.raises(RemoteToolForbidden):
            open_request(agent, value)
    # A payload the console does not recognise stays a question (answered in words).
    _, [question] = open_request(agent, {"question": "Which region?"}, interrupt_id="q")
    assert question.tool == UNKNOWN_TOOL
    assert question.allowed_decisions == ["respond"]


def test_the_tier_wins_when_it_forbids_every_decision_the_agent_allows(demo_policy, agent):
    RiskTier.objects.filter(name="write").update(allowed_decisions=["approve", "reject"])
    _, [approval] = open_request(agent, hitl(decisions=("edit",)))
    assert approval.tier == "write"
    assert approval.allowed_decisions == ["approve", "reject"]
