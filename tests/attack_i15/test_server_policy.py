"""Attacks on "the tier, expiry and decisions come from the console's policy, never from the
caller" (agents/remote/services.py::remote_items / _tier_from_policy)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from approvals import policy
from approvals.models import ApprovalRequest, RiskTier
from tests.agents.remote.helpers import hitl, refund

URL = "/api/approval-requests/"


def agent_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {key}")
    return client


def opened_approval(answer) -> ApprovalRequest:
    assert answer.status_code == 201, answer.content
    return ApprovalRequest.objects.get(pk=answer.json()["approvals"][0]["id"])


@pytest.mark.parametrize(
    "claimed", ["2999-01-01T00:00:00+00:00", "2000-01-01T00:00:00+00:00"], ids=["future", "past"]
)
def test_an_unrecognised_payload_cannot_set_its_own_expiry(demo_policy, agent_key, claimed):
    value = {"question": "May I wire the money?", "expires_at": claimed}
    before = timezone.now()
    answer = agent_client(agent_key).post(
        URL, {"thread_id": "t", "interrupt_id": "i", "value": value}, format="json"
    )
    approval = opened_approval(answer)
    ttl = dt.timedelta(seconds=policy.tier_ttl_seconds(approval.tier))
    # The tier's default expiry, not the caller's.
    assert before + ttl - dt.timedelta(minutes=1) <= approval.expires_at
    assert approval.expires_at <= timezone.now() + ttl


@pytest.mark.parametrize("claimed", [5, "approve", ["bogus"]], ids=["int", "string", "unknown"])
def test_a_console_payloads_allowed_decisions_are_refused_or_made_real(
    demo_policy, agent_key, claimed
):
    value = {
        "type": "console.approval",
        "tool": "refund_order",
        "args": refund(),
        "allowed_decisions": claimed,
    }
    answer = agent_client(agent_key).post(
        URL, {"thread_id": "t", "interrupt_id": "i", "value": value}, format="json"
    )
    assert answer.status_code in (201, 400), answer.content
    if answer.status_code == 400:
        assert "value" in answer.json()["errors"]
        return
    approval = opened_approval(answer)
    # A person can decide it: only real decisions, at least one.
    assert approval.allowed_decisions
    assert set(approval.allowed_decisions) <= set(policy.ALL_DECISIONS)


def test_a_console_payload_cannot_allow_a_decision_its_tier_forbids(demo_policy, agent_key):
    RiskTier.objects.filter(name="write").update(allowed_decisions=["approve", "reject"])
    value = {
        "type": "console.approval",
        "tool": "refund_order",
        "args": refund(),
        "allowed_decisions": ["edit"],
    }
    answer = agent_client(agent_key).post(
        URL, {"thread_id": "t", "interrupt_id": "i", "value": value}, format="json"
    )
    approval = opened_approval(answer)
    assert approval.tier == "write"
    assert "edit" not in approval.allowed_decisions  # the tier forbids edits


@pytest.mark.parametrize(
    "value",
    [
        {"type": "console.approval", "tool": "t" * 300, "args": {}},
        hitl(name="t" * 300),
        {"action_request": {"action": "t" * 300, "args": {}}, "config": {"allow_accept": True}},
    ],
    ids=["console", "hitl", "agent_inbox"],
)
def test_a_tool_name_longer_than_the_console_stores_gets_400_not_500(demo_policy, agent_key, value):
    answer = agent_client(agent_key).post(
        URL, {"thread_id": "t", "interrupt_id": "i", "value": value}, format="json"
    )
    assert answer.status_code == 400, answer.content
    assert "value" in answer.json()["errors"]
