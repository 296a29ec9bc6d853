"""Attacks on the idempotency key (agent, thread, interrupt) and the 64-character caps:
an approval must never answer a request it was not made for."""

from __future__ import annotations

from agents.remote.bodies import remote_request_body
from agents.remote.errors import RemoteRequestConflict
from agents.remote.registry import external_agent_save
from agents.remote.services import approval_interrupt_id
from agents.runtime import advance
from approvals.models import ApprovalRequest
from tests.agents.remote.conftest import make_agent
from tests.agents.remote.helpers import hitl, open_request, refund
from tests.support.approvals import decide


def test_an_interrupt_id_equal_to_another_ones_hashed_form_never_shares_its_approvals(
    demo_policy, agent, bob
):
    long_id = "L" * 100
    cheap, [approval] = open_request(agent, hitl(**refund(20)), interrupt_id=long_id)
    try:
        costly, costly_approvals = open_request(
            agent, hitl(**refund(5000)), interrupt_id=approval_interrupt_id(long_id)
        )
    except RemoteRequestConflict:
        return  # refused: fine
    # Opened: it must have approvals of its own, for its own args.
    assert [a.pk for a in costly_approvals] != [approval.pk]
    assert all(a.args["amount"] == 5000 for a in costly_approvals)
    decide(approval, bob)  # bob approves the refund of 20 (tier write)
    advance.run_advance(run_id=cheap.run_id)
    costly.refresh_from_db()
    assert costly.status == "pending"  # the refund of 5000 (critical) was approved by nobody


def test_a_new_agent_with_a_renamed_agents_old_name_never_reaches_its_runs(demo_policy, bob):
    old = make_agent("billing")
    first, [approval] = open_request(old, hitl(**refund(20)))
    decide(approval, bob)
    advance.run_advance(run_id=first.run_id)
    old.name = "billing-v1"  # renamed in the admin ...
    external_agent_save(agent=old, actor="system:test")
    newcomer = make_agent("billing", callback_url="https://other.example/hooks")  # ... reused

    try:
        theirs, approvals = open_request(newcomer, hitl(**refund(20)))
    except RemoteRequestConflict:
        return  # refused: fine
    assert theirs.run_id != first.run_id
    assert approval.pk not in [a.pk for a in approvals]
    body = remote_request_body(remote=theirs)
    assert body["status"] == "pending"
    assert all(a["decision"] is None for a in body["approvals"])  # bob decided the old agent's
    assert ApprovalRequest.objects.get(pk=approval.pk).run_id == first.run_id
