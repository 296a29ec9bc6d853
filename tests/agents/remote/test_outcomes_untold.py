"""Outcomes the reviewer and the stuck sweep must read right: one reported before any
decision is shown on the page as already executed; an approve the agent was never told (its
run cancelled before the advance) is "cancelled" on the wire and expects no outcome."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone
from rest_framework.test import APIClient

from agents.remote.models import RemoteRequest
from agents.runtime import advance
from agents.services import run_cancel
from approvals.models import AgentRun, ApprovalRequest, StuckItem
from approvals.services.stuck import stuck_sweep
from tests.agents.remote.helpers import open_request, refund
from tests.support.approvals import decide
from tests.support.people import client_for

URL = "/api/approval-requests/"


def agent_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {key}")
    return client


def report_for(approval: ApprovalRequest, client: APIClient, remote: RemoteRequest):
    body = client.get(f"{URL}{remote.id}/").json()["approvals"][0]
    return client.post(
        f"{URL}{remote.id}/outcome/",
        {
            "approval_id": approval.pk,
            "idempotency_key": body["idempotency_key"],
            "executed_args": refund(),
            "status": "succeeded",
        },
        format="json",
    )


def test_an_outcome_reported_while_pending_is_a_warning_on_the_approval_page(
    demo_policy, agent, agent_key, bob
):
    remote, [approval] = open_request(agent)
    assert report_for(approval, agent_client(agent_key), remote).status_code == 201
    page = client_for(bob).get(f"/approvals/{approval.pk}/").content.decode()
    assert "data-executed-before-decision" in page
    assert "The agent reports it already executed this action" in page
    assert "reported for an action that was not approved (yet)" in page
    # Not a mismatch of args: nothing was approved to compare with.
    assert "executed args differ" not in page


def _approved_then_cancelled(agent, bob, admin) -> tuple[RemoteRequest, ApprovalRequest]:
    remote, [approval] = open_request(agent)
    decide(approval, bob)
    run_cancel(run=AgentRun.objects.get(pk=remote.run_id), user=admin)
    advance.run_advance(run_id=remote.run_id)
    return RemoteRequest.objects.get(pk=remote.pk), ApprovalRequest.objects.get(pk=approval.pk)


def test_an_approve_the_agent_was_never_told_reads_cancelled_on_the_wire(
    demo_policy, agent, agent_key, bob, admin
):
    remote, approval = _approved_then_cancelled(agent, bob, admin)
    body = agent_client(agent_key).get(f"{URL}{remote.id}/").json()
    assert body["status"] == "cancelled" and body["resume"] is None
    assert body["approvals"][0]["status"] == "cancelled"
    assert body["approvals"][0]["decision"]["decision"] == "approve"  # the record, kept
    page = client_for(bob).get(f"/approvals/{approval.pk}/").content.decode()
    assert 'data-outcome="untold"' in page and 'data-outcome="awaited"' not in page


def test_an_outcome_of_an_approve_the_agent_was_never_told_is_flagged_not_approved(
    demo_policy, agent, agent_key, bob, admin
):
    remote, approval = _approved_then_cancelled(agent, bob, admin)
    answer = report_for(approval, agent_client(agent_key), remote)
    assert answer.status_code == 201
    assert answer.json()["approvals"][0]["outcome"]["flags"] == ["not_approved"]


def test_no_unreported_item_is_raised_before_the_agent_is_told_nor_after_a_cancel(
    demo_policy, agent, bob, admin
):
    remote, [approval] = open_request(agent)
    decide(approval, bob)
    stuck_sweep(now=timezone.now() + dt.timedelta(days=1))  # the advance has not told it yet
    assert not StuckItem.objects.filter(kind=StuckItem.Kind.OUTCOME_NOT_REPORTED).exists()
    run_cancel(run=AgentRun.objects.get(pk=remote.run_id), user=admin)
    advance.run_advance(run_id=remote.run_id)
    stuck_sweep(now=timezone.now() + dt.timedelta(days=2))
    assert not StuckItem.objects.filter(kind=StuckItem.Kind.OUTCOME_NOT_REPORTED).exists()


def test_an_approve_told_to_the_agent_then_cancelled_still_expects_its_outcome(
    demo_policy, agent, bob, admin
):
    remote, [approval] = open_request(agent)
    decide(approval, bob)
    advance.run_advance(run_id=remote.run_id)  # told: decided, with its resume value
    run_cancel(run=AgentRun.objects.get(pk=remote.run_id), user=admin)
    advance.run_advance(run_id=remote.run_id)
    assert RemoteRequest.objects.get(pk=remote.pk).status == "decided"
    stuck_sweep(now=timezone.now() + dt.timedelta(days=1))
    assert StuckItem.objects.filter(
        kind=StuckItem.Kind.OUTCOME_NOT_REPORTED, key=str(approval.pk), cleared_at__isnull=True
    ).exists()
