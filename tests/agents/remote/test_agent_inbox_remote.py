"""Agent Inbox payloads over the remote service: the request reads as ``agent_inbox`` and the
decision comes back as the ``HumanResponse``, in the shape it was sent."""

from __future__ import annotations

import pytest

from agents.remote.models import RemoteRequest
from agents.remote.services import remote_request_open, remote_request_view
from agents.runtime import advance
from approvals.models import ApprovalRequest
from tests.support.approvals import decide

ARGS = {"order_id": "o-1", "amount": 20}
REQUEST = {
    "action_request": {"action": "issue_refund", "args": ARGS},
    "config": {
        "allow_accept": True,
        "allow_edit": True,
        "allow_respond": False,
        "allow_ignore": True,
    },
    "description": "The parcel never arrived.",
}


@pytest.mark.parametrize("value", [[REQUEST], REQUEST], ids=["list of one", "alone"])
def test_an_agent_inbox_request_is_answered_with_its_human_response(demo_policy, agent, bob, value):
    remote, _ = remote_request_open(agent=agent, thread_id="t-1", interrupt_id="i-1", value=value)
    assert remote.protocol == RemoteRequest.Protocol.AGENT_INBOX
    approval = ApprovalRequest.objects.get(run_id=remote.run_id)
    assert approval.allowed_decisions == ["approve", "edit", "reject"]
    assert approval.payload["rationale"] == "The parcel never arrived."

    decide(approval, bob, "edit", args={"order_id": "o-1", "amount": 15})
    advance.run_advance(run_id=remote.run_id)
    remote.refresh_from_db()
    edited = {
        "type": "edit",
        "args": {"action": "issue_refund", "args": {"order_id": "o-1", "amount": 15}},
    }
    assert remote.resume == ([edited] if isinstance(value, list) else edited)
    assert remote_request_view(remote=remote)["protocol"] == "agent_inbox"


def test_a_rejection_reaches_an_agent_inbox_agent_as_ignore(demo_policy, agent, bob):
    remote, _ = remote_request_open(
        agent=agent, thread_id="t-1", interrupt_id="i-1", value=[REQUEST]
    )
    decide(
        ApprovalRequest.objects.get(run_id=remote.run_id),
        bob,
        "reject",
        message="delivered on Monday",
    )
    advance.run_advance(run_id=remote.run_id)
    remote.refresh_from_db()
    assert remote.resume == [{"type": "ignore", "args": None}]
