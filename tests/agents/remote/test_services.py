"""The remote approval service's writes: open (idempotent, tier from policy), decide, advance."""

from __future__ import annotations

import pytest

from agents.remote import services
from agents.remote.errors import RemoteRequestConflict, RemoteToolForbidden
from agents.remote.models import RemoteRequest
from agents.remote.services import approval_interrupt_id, remote_request_open, remote_request_view
from agents.runtime import advance
from approvals.models import AgentRun, ApprovalRequest, Notification
from approvals.services import DecisionForbidden
from tests.agents.remote.conftest import make_agent
from tests.agents.remote.helpers import open_request
from tests.support.approvals import decide


def hitl(name: str = "refund_order", **args) -> dict:
    return {
        "action_requests": [{"name": name, "args": args or {"order_id": "o-1", "amount": 20}}],
        "review_configs": [{"action_name": name, "allowed_decisions": ["approve", "reject"]}],
    }


def console_payload(tier: str = "read", **args) -> dict:
    return {
        "type": "console.approval",
        "tool": "refund_order",
        "args": args or {"order_id": "o-1", "amount": 900},
        "tier": tier,
        "rationale": "the customer asked",
    }


def test_a_retry_with_the_same_value_returns_the_same_request(demo_policy, agent):
    first, created = remote_request_open(
        agent=agent, thread_id="t-1", interrupt_id="i-1", value=hitl()
    )
    again, created_again = remote_request_open(
        agent=agent, thread_id="t-1", interrupt_id="i-1", value=hitl()
    )
    assert (created, created_again) == (True, False)
    assert again.pk == first.pk
    assert ApprovalRequest.objects.filter(run=first.run).count() == 1
    run = AgentRun.objects.get(pk=first.run_id)
    assert run.agent == "external:billing"
    assert run.requested_by == agent.user
    assert run.status == AgentRun.Status.WAITING


def test_the_same_ids_with_another_value_are_a_conflict(demo_policy, agent):
    remote_request_open(agent=agent, thread_id="t-1", interrupt_id="i-1", value=hitl())
    with pytest.raises(RemoteRequestConflict) as exc:
        remote_request_open(
            agent=agent, thread_id="t-1", interrupt_id="i-1", value=hitl(order_id="o-2", amount=5)
        )
    assert exc.value.status_code == 409


def test_the_tier_comes_from_the_policy_not_from_the_caller(demo_policy, agent):
    remote, _ = remote_request_open(
        agent=agent, thread_id="t-1", interrupt_id="i-1", value=console_payload(tier="read")
    )
    approval = ApprovalRequest.objects.get(run=remote.run)
    assert approval.tier == "critical"  # refund_order over 500
    assert approval.payload["tier"] == "critical"


def test_a_tool_the_agent_is_not_registered_for_is_refused(demo_policy):
    agent = make_agent("narrow", tools=["ticket_create"])
    with pytest.raises(RemoteToolForbidden, match="refund_order"):
        remote_request_open(agent=agent, thread_id="t", interrupt_id="i", value=hitl())


def test_the_agents_service_user_can_never_decide(demo_policy, agent):
    remote, _ = remote_request_open(agent=agent, thread_id="t-1", interrupt_id="i-1", value=hitl())
    approval = ApprovalRequest.objects.get(run=remote.run)
    with pytest.raises(DecisionForbidden):
        decide(approval, agent.user)


def test_a_decision_closes_the_request_with_the_resume_value_and_writes_the_callback(
    demo_policy, agent, bob
):
    remote, _ = remote_request_open(agent=agent, thread_id="t-1", interrupt_id="i-1", value=hitl())
    approval = ApprovalRequest.objects.get(run=remote.run)
    decide(approval, bob)
    assert advance.run_advance(run_id=remote.run_id).startswith("external: 1 decided")
    remote.refresh_from_db()
    assert remote.status == RemoteRequest.Status.DECIDED
    assert remote.resume == {"decisions": [{"type": "approve"}]}
    body = remote_request_view(remote=remote)
    assert body["approvals"][0]["status"] == "approved"
    assert body["approvals"][0]["idempotency_key"].startswith("cak_")
    callback = Notification.objects.get(event=Notification.Event.CALLBACK)
    assert callback.recipient == agent.callback_url
    assert callback.payload["type"] == "approval_request.decided"
    assert AgentRun.objects.get(pk=remote.run_id).status == AgentRun.Status.RUNNING
    # A second advance delivers nothing twice.
    advance.run_advance(run_id=remote.run_id)
    assert Notification.objects.filter(event=Notification.Event.CALLBACK).count() == 1


def test_an_interrupt_id_longer_than_an_approvals_column_is_stored_hashed_within_it(
    demo_policy, agent
):
    long_id = "i" * 200
    remote, _ = remote_request_open(
        agent=agent, thread_id="t-long", interrupt_id=long_id, value=hitl()
    )
    stored = ApprovalRequest.objects.get(run=remote.run)
    assert len(stored.interrupt_id) <= ApprovalRequest._meta.get_field("interrupt_id").max_length
    assert stored.interrupt_id == remote.approval_interrupt_id != long_id
    again, created = remote_request_open(
        agent=agent, thread_id="t-long", interrupt_id=long_id, value=hitl()
    )
    assert (again.pk, created) == (remote.pk, False)


def test_a_verbatim_interrupt_id_never_takes_the_hashed_form(db):
    assert approval_interrupt_id("i-1") == "i-1"
    long_form = approval_interrupt_id("L" * 100)
    assert long_form.startswith("#") and len(long_form) == 64
    assert approval_interrupt_id(long_form) != long_form  # a "#..." id is hashed itself
    assert approval_interrupt_id(long_form).startswith("#")


def test_a_request_never_shares_the_approvals_of_another(demo_policy, agent, monkeypatch):
    first, _ = open_request(agent, interrupt_id="a")
    # Should two ids ever map to one stored id, the second request is refused, not joined.
    monkeypatch.setattr(services, "approval_interrupt_id", lambda interrupt_id: "a")
    with pytest.raises(RemoteRequestConflict):
        open_request(agent, hitl(amount=5000), interrupt_id="b")
    assert RemoteRequest.objects.filter(agent=agent).count() == 1
    assert ApprovalRequest.objects.filter(run_id=first.run_id).count() == 1


def test_ids_longer_than_the_console_stores_are_refused_by_the_service_too(demo_policy, agent):
    # The connector calls the service without the API's serializer.
    for ids in ({"thread_id": "t" * 201}, {"interrupt_id": "i" * 201}, {"thread_id": ""}):
        with pytest.raises(services.RemoteRequestInvalid) as refused:
            open_request(agent, **ids)
        assert set(refused.value.errors) == set(ids)
