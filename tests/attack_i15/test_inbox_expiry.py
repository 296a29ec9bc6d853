"""Agent Inbox / HITL payloads under attack: what the agent's own config forbids never
reaches it, and what it runs is what the console recorded as approved."""

from __future__ import annotations

import datetime as dt

import pytest

from agents.remote.models import RemoteRequest
from agents.runtime import advance
from approvals.models import ApprovalRequest, RiskTier
from approvals.services import approval_expire
from tests.agents.remote.helpers import hitl, open_request, refund
from tests.support.approvals import decide


def closed(remote: RemoteRequest) -> RemoteRequest:
    advance.run_advance(run_id=remote.run_id)
    return RemoteRequest.objects.get(pk=remote.pk)


def expire(approval: ApprovalRequest) -> None:
    approval.refresh_from_db()
    assert approval_expire(
        approval_id=approval.pk, now=approval.expires_at + dt.timedelta(seconds=1)
    )


def inbox(config: dict[str, bool]) -> list[dict]:
    return [
        {
            "action_request": {"action": "refund_order", "args": refund(20)},
            "config": config,
            "description": "refund?",
        }
    ]


@pytest.fixture
def approve_on_expiry(demo_policy):
    RiskTier.objects.filter(name="write").update(expiry_decision=RiskTier.ExpiryDecision.APPROVE)


def test_an_inbox_config_that_forbids_accept_never_gets_accept_on_expiry(approve_on_expiry, agent):
    """The graph said the reviewer may only ignore or respond; the tier's expiry default is
    approve: the timeout must not hand the graph an "accept" its own config forbids."""
    remote, [approval] = open_request(
        agent,
        inbox(
            {
                "allow_accept": False,
                "allow_edit": False,
                "allow_respond": True,
                "allow_ignore": True,
            }
        ),
    )
    assert "approve" not in approval.allowed_decisions
    expire(approval)
    resume = closed(remote).resume
    assert resume[0]["type"] != "accept", f"the graph got {resume}"


def test_a_hitl_config_that_allows_only_reject_never_gets_approve_on_expiry(
    approve_on_expiry, agent
):
    """LangChain's middleware raises on a decision outside allowed_decisions: the run dies
    instead of going on; the console must answer with a decision the config allows."""
    remote, [approval] = open_request(agent, hitl(decisions=("reject",)))
    expire(approval)
    decision = closed(remote).resume["decisions"][0]
    assert decision["type"] == "reject", f"the agent got {decision}"


def test_a_timeout_approve_after_an_edit_vote_runs_what_the_console_recorded(
    approve_on_expiry, agent, bob
):
    """Quorum 2: bob's edit starts a new round (approval.args = his args); nobody else votes;
    the expiry approves. The console records approved args = bob's; the agent must run those,
    not its own (or the console must record the agent's)."""
    RiskTier.objects.filter(name="write").update(required_approvals=2)
    remote, [approval] = open_request(agent, hitl())
    decide(approval, bob, "edit", args=refund(7))
    approval.refresh_from_db()
    assert approval.is_pending and approval.args == refund(7)
    expire(approval)
    approval.refresh_from_db()
    recorded = approval.decision.get("args")
    decision = closed(remote).resume["decisions"][0]
    runs = decision["edited_action"]["args"] if decision["type"] == "edit" else refund(20)
    assert runs == recorded, f"the console recorded {recorded}, the agent runs {runs}"


def test_a_reject_reaches_an_inbox_graph_as_ignore(demo_policy, agent, bob):
    """Held: reject -> ignore, never accept, whatever the config."""
    remote, [approval] = open_request(
        agent, inbox({"allow_accept": True, "allow_edit": True, "allow_ignore": True})
    )
    decide(approval, bob, "reject", message="no")
    assert closed(remote).resume == [{"type": "ignore", "args": None}]
