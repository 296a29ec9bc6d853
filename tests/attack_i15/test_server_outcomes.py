"""Attacks on outcome reports and the "outcome not reported" stuck item."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone
from rest_framework.test import APIClient

from agents.runtime import advance
from agents.services import run_cancel
from approvals.models import AgentRun, ApprovalRequest, StuckItem
from approvals.services.stuck import stuck_sweep
from tests.agents.remote.helpers import hitl, open_request, refund
from tests.support.approvals import decide
from tests.support.people import rest_client_for

URL = "/api/approval-requests/"


def agent_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {key}")
    return client


def test_an_effect_reported_before_any_decision_is_refused_or_shown_to_the_reviewer(
    demo_policy, agent_key, bob
):
    agent = agent_client(agent_key)
    opened = agent.post(
        URL, {"thread_id": "t", "interrupt_id": "i", "value": hitl()}, format="json"
    ).json()
    approval = opened["approvals"][0]
    report = {
        "approval_id": approval["id"],
        "idempotency_key": approval["idempotency_key"],
        "executed_args": refund(),
        "status": "succeeded",
    }
    answer = agent.post(f"{URL}{opened['id']}/outcome/", report, format="json")
    if answer.status_code == 409:
        return  # refused: nothing was approved yet
    assert answer.status_code == 201, answer.content
    # Recorded: the reviewer about to decide must see that it already ran, flagged.
    seen = rest_client_for(bob).get(f"/api/approvals/{approval['id']}/").json()
    assert seen["status"] == "pending"
    assert seen["outcome"] is not None
    assert "not_approved" in seen["outcome"]["flags"]


def test_an_approved_action_of_a_cancelled_request_is_never_an_unreported_outcome(
    demo_policy, agent, bob, admin
):
    remote, [approval] = open_request(agent)
    decide(approval, bob)  # approved, then the run is cancelled before its advance ran
    run_cancel(run=AgentRun.objects.get(pk=remote.run_id), user=admin)
    advance.run_advance(run_id=remote.run_id)
    remote.refresh_from_db()
    assert remote.status == "cancelled"  # the agent was told "cancelled", no resume value
    assert remote.resume is None
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "approved"

    stuck_sweep(now=timezone.now() + dt.timedelta(days=1))
    assert not StuckItem.objects.filter(
        kind=StuckItem.Kind.OUTCOME_NOT_REPORTED, cleared_at__isnull=True
    ).exists()
