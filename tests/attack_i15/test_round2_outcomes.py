"""Round 2: the "outcome not reported" stuck item is raised only for a decision the agent was
told, and counted from when it was told; outcomes recorded per approval."""

from __future__ import annotations

import datetime as dt

from agents.remote.models import RemoteRequest
from agents.runtime import advance
from approvals.models import StuckItem
from approvals.services.stuck import stuck_sweep
from tests.agents.remote.helpers import open_request, refund
from tests.support.approvals import decide


def two_calls() -> dict:
    return {
        "action_requests": [
            {"name": "refund_order", "args": refund(10, "o-1")},
            {"name": "refund_order", "args": refund(20, "o-2")},
        ],
        "review_configs": [
            {"action_name": "refund_order", "allowed_decisions": ["approve", "reject"]}
        ],
    }


def test_an_approved_action_whose_request_still_waits_is_not_an_unreported_outcome(
    demo_policy, agent, bob, settings
):
    """A batch of two calls: the first approved, the second still pending. The request stays
    pending (the agent is told nothing until both are final), so the agent cannot have run the
    first nor reported it: no stuck item "never reported the outcome"."""
    remote, approvals = open_request(agent, two_calls())
    decide(approvals[0], bob)
    advance.run_advance(run_id=remote.run_id)
    remote.refresh_from_db()
    assert remote.status == RemoteRequest.Status.PENDING
    approvals[0].refresh_from_db()
    late = approvals[0].decided_at + dt.timedelta(
        seconds=settings.REMOTE_OUTCOME_DEADLINE_SECONDS + 60
    )
    approvals[1].expires_at = late + dt.timedelta(days=1)
    approvals[1].save(update_fields=["expires_at"])
    stuck_sweep(now=late)
    assert not StuckItem.objects.filter(kind=StuckItem.Kind.OUTCOME_NOT_REPORTED).exists()


def test_the_outcome_deadline_counts_from_when_the_agent_was_told(
    demo_policy, agent, bob, carol, settings
):
    """The first call approved at t0, the second only at t0 + deadline - 1 min: the agent is
    told both then. A minute later the first is not yet overdue."""
    remote, approvals = open_request(agent, two_calls())
    decide(approvals[0], bob)
    approvals[0].refresh_from_db()
    t0 = approvals[0].decided_at
    decide(approvals[1], carol)
    advance.run_advance(run_id=remote.run_id)
    remote.refresh_from_db()
    assert remote.status == RemoteRequest.Status.DECIDED
    told = t0 + dt.timedelta(seconds=settings.REMOTE_OUTCOME_DEADLINE_SECONDS - 60)
    RemoteRequest.objects.filter(pk=remote.pk).update(decided_at=told)
    type(approvals[1]).objects.filter(pk=approvals[1].pk).update(decided_at=told)
    stuck_sweep(now=told + dt.timedelta(seconds=120))
    assert not StuckItem.objects.filter(kind=StuckItem.Kind.OUTCOME_NOT_REPORTED).exists()


def test_a_failed_attempt_then_a_succeeded_retry_ends_with_the_effect_recorded(
    demo_policy, agent_key, bob
):
    """RemoteGateMiddleware reports ``failed`` when the tool raises, then re-raises; the graph
    is retried from its checkpoint, the tools node runs the call again under the same key and
    it succeeds. The console keeps the first report and answers the true one with 409: the
    approval reads "failed" although the refund was made."""
    from tests.agents.remote.test_outcomes import URL, client_of, opened_and_decided, report

    client = client_of(agent_key)
    body = opened_and_decided(client, bob)
    failed = client.post(
        f"{URL}{body['id']}/outcome/",
        report(body, status="failed", result={"error": "TimeoutError()"}),
        format="json",
    )
    assert failed.status_code == 201
    retried = client.post(
        f"{URL}{body['id']}/outcome/", report(body, status="succeeded"), format="json"
    )
    assert retried.status_code in (200, 201), retried.json()
    got = client.get(f"{URL}{body['id']}/").json()
    assert got["approvals"][0]["outcome"]["status"] == "succeeded"
