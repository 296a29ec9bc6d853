"""What changed while an approval waited: the agent's version, the tool's args schema and the
policy are each noticed, nothing is raised for an unchanged or a legacy approval, and deciding
one with changes needs their digest (428 otherwise), which the audit records as a warning."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone
from pydantic import BaseModel

from agents.hitl.gate import gate_payload
from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from agents.tools import tool_get, tool_register
from approvals.changes import approval_changes, changes_digest
from approvals.models import RiskTier, ToolPolicy, ToolPolicyRule
from approvals.services import (
    ChangesNotAcknowledged,
    approval_decide,
    approval_requests_sync,
    policy_change_record,
)
from audit.models import AuditEvent
from tests.support.factories import ApprovalFactory, RunFactory
from tests.support.people import client_for, rest_client_for

ARGS = {
    "order_id": "A-1001",
    "amount": "49.90",
    "reason": "arrived damaged",
    "sku": "MUG-BLUE",
    "quantity": 1,
    "customer_email": "pat@example.com",
    "currency": "USD",
}


def requested(run):
    """A refund_order approval of ``run`` as the runner opens it (with its baseline)."""
    payload = gate_payload(
        thread_id=run.thread_id,
        tool="refund_order",
        args=ARGS,
        rationale="Charged twice.",
        evidence=[],
        tier="write",
    )
    (approval,) = approval_requests_sync(
        run=run,
        requests=[
            {
                "interrupt_id": "i-1",
                "action_index": 0,
                "tool": "refund_order",
                "args": ARGS,
                "payload": payload,
                "tier": "write",
                "allowed_decisions": ["approve", "edit", "reject", "respond"],
                "expires_at": timezone.now() + dt.timedelta(hours=1),
            }
        ],
    )
    return approval


@pytest.fixture
def approval(demo_policy, alice):
    return requested(RunFactory(agent="refund_agent", requested_by=alice))


@pytest.fixture
def new_agent_version():
    agent_register(dataclasses.replace(_refund_agent(), version="2"))
    yield
    agent_unregister("refund_agent", "2")


def _refund_agent() -> AgentSpec:
    from agents.runtime.registry import agent_get

    return agent_get("refund_agent")


class _NewRefundArgs(BaseModel):
    order_id: str
    amount: str
    approved_by_finance: bool


@pytest.fixture
def new_schema():
    spec = tool_get("refund_order")
    tool_register(dataclasses.replace(spec, args_model=_NewRefundArgs))
    yield
    tool_register(spec)


def change_write_tier(actor, **fields):
    tier = RiskTier.objects.get(name="write")
    for name, value in fields.items():
        setattr(tier, name, value)
    tier.save()
    policy_change_record(obj=tier, change="changed", actor=actor)


def decide(approval, user, **kw):
    approval.refresh_from_db()
    return approval_decide(
        approval=approval, user=user, decision="approve", seen_hash=approval.payload_hash, **kw
    )


# --- what is noticed ---------------------------------------------------------------------------


def test_a_request_records_what_it_rests_on(approval):
    assert approval.agent_version == "1"
    assert len(approval.schema_digest) == 64
    assert len(approval.policy_digest) == 64


def test_an_unchanged_approval_has_no_changes(approval):
    assert approval_changes(approval) == []


def test_a_new_agent_version_is_noticed(approval, new_agent_version):
    (change,) = approval_changes(approval)
    assert change.kind == "agent_version"
    assert (change.before, change.after) == ("1", "2")
    assert "refund_agent agent changed from version 1 to 2" in change.summary


def test_a_changed_args_schema_is_noticed(approval, new_schema):
    (change,) = approval_changes(approval)
    assert change.kind == "args_schema"
    assert "refund_order" in change.summary


def test_a_policy_change_of_the_tier_is_noticed_with_who_and_when(approval, admin):
    change_write_tier(admin, ttl_seconds=600)
    (change,) = approval_changes(approval)
    assert change.kind == "policy"
    assert change.by == "admin"
    assert change.at is not None
    assert "tier write" in change.summary and "admin" in change.summary


def test_a_change_of_the_tools_policy_is_noticed(approval, admin):
    tool_policy = ToolPolicy.objects.get(tool="refund_order")
    ToolPolicyRule.objects.filter(policy=tool_policy).update(value="100")
    policy_change_record(obj=tool_policy, change="changed", actor=admin)
    (change,) = approval_changes(approval)
    assert change.kind == "policy"
    assert "the refund_order tool policy" in change.summary


def test_a_policy_change_elsewhere_is_no_change_of_this_approval(approval, admin):
    critical = RiskTier.objects.get(name="critical")
    critical.ttl_seconds = 60
    critical.save()
    policy_change_record(obj=critical, change="changed", actor=admin)
    assert approval_changes(approval) == []


def test_a_legacy_approval_raises_no_false_alarm(
    demo_policy, alice, admin, new_agent_version, new_schema
):
    legacy = ApprovalFactory(run=RunFactory(agent="refund_agent", requested_by=alice))
    change_write_tier(admin, ttl_seconds=600)
    assert (legacy.agent_version, legacy.schema_digest, legacy.policy_digest) == ("", "", "")
    assert approval_changes(legacy) == []


def test_an_agent_the_registry_does_not_know_records_no_version_and_raises_nothing(
    demo_policy, alice
):
    approval = requested(RunFactory(agent="gone_agent", requested_by=alice))
    assert approval.agent_version == ""
    assert approval_changes(approval) == []


def test_a_decided_approval_shows_no_changes(approval, bob, admin):
    decide(approval, bob)
    change_write_tier(admin, ttl_seconds=600)
    approval.refresh_from_db()
    assert approval_changes(approval) == []


# --- deciding ----------------------------------------------------------------------------------


def test_deciding_without_confirming_the_changes_is_refused_with_428(approval, bob, admin):
    change_write_tier(admin, ttl_seconds=600)
    with pytest.raises(ChangesNotAcknowledged) as refused:
        decide(approval, bob)
    assert refused.value.status_code == 428
    assert [c.kind for c in refused.value.changes] == ["policy"]
    assert refused.value.digest == changes_digest(approval_changes(approval))
    assert refused.value.stale is False
    approval.refresh_from_db()
    assert approval.is_pending
    assert not AuditEvent.objects.filter(action="approval.voted").exists()


def test_a_confirmation_of_other_changes_is_refused_as_stale(
    approval, bob, admin, new_agent_version
):
    seen = changes_digest(approval_changes(approval))  # the agent version only
    change_write_tier(admin, ttl_seconds=600)  # then the policy changed too
    with pytest.raises(ChangesNotAcknowledged) as refused:
        decide(approval, bob, changes_seen=seen)
    assert refused.value.stale is True
    assert [c.kind for c in refused.value.changes] == ["agent_version", "policy"]


def test_the_right_digest_decides_and_the_audit_records_the_warning(
    approval, bob, admin, new_schema
):
    change_write_tier(admin, ttl_seconds=600)
    seen = changes_digest(approval_changes(approval))
    decided = decide(approval, bob, changes_seen=seen)
    assert decided.status == "approved"
    voted = AuditEvent.objects.get(action="approval.voted", approval_id=approval.pk)
    final = AuditEvent.objects.get(action="approval.decided", approval_id=approval.pk)
    assert voted.data["warned"] == ["args_schema", "policy"]
    assert final.data["warned"] == ["args_schema", "policy"]


def test_an_unchanged_approval_decides_as_before_without_a_warning(approval, bob):
    decide(approval, bob)
    voted = AuditEvent.objects.get(action="approval.voted", approval_id=approval.pk)
    assert "warned" not in voted.data


# --- the API and the page ----------------------------------------------------------------------


def test_the_api_answers_428_listing_the_changes_then_decides_with_their_digest(
    approval, bob, admin
):
    change_write_tier(admin, ttl_seconds=600)
    api = rest_client_for(bob)
    url = f"/api/approvals/{approval.pk}/decision/"
    body = {"decision": "approve", "payload_hash": approval.payload_hash}

    refused = api.post(url, body, format="json")
    assert refused.status_code == 428
    data = refused.json()
    assert data["errors"] == {
        "changes_seen": "must be the digest of the changes shown (changes_digest)"
    }
    (change,) = data["changes"]
    assert change["kind"] == "policy" and change["by"] == "admin"
    detail = api.get(f"/api/approvals/{approval.pk}/").json()
    assert detail["changes_digest"] == data["changes_digest"]
    assert [c["kind"] for c in detail["changes"]] == ["policy"]

    decided = api.post(url, {**body, "changes_seen": data["changes_digest"]}, format="json")
    assert decided.status_code == 200
    assert decided.json()["status"] == "approved"


def test_the_page_shows_the_banner_and_refuses_with_the_input_kept(approval, bob, admin):
    change_write_tier(admin, ttl_seconds=600)
    page = client_for(bob)
    detail = page.get(reverse("approvals:detail", args=[approval.pk])).content.decode()
    assert 'id="changes-banner"' in detail and "tier write" in detail
    digest = changes_digest(approval_changes(approval))
    # approve, reject, respond (an edit shows its box beside the confirmation, after the diff)
    assert detail.count(f'name="changes_seen" value="{digest}"') == 3

    decide_url = reverse("approvals:decide", args=[approval.pk])
    post = {"decision": "reject", "seen_hash": approval.payload_hash, "message": "Not now."}
    refused = page.post(decide_url, post)
    assert refused.status_code == 428
    html = refused.content.decode()
    assert 'class="changes-banner refused"' in html
    assert "Not now.</textarea>" in html  # the reason typed is kept
    approval.refresh_from_db()
    assert approval.is_pending

    decided = page.post(decide_url, {**post, "changes_seen": digest})
    assert decided.status_code == 302
    approval.refresh_from_db()
    assert approval.status == "rejected"


def test_the_page_keeps_an_edit_and_its_diff_when_the_changes_were_not_confirmed(
    approval, bob, admin
):
    change_write_tier(admin, ttl_seconds=600)
    edited = {f"args-{k}": str(v) for k, v in ARGS.items()} | {"args-amount": "20"}
    from audit.canonical import canonical_hash

    previewed = canonical_hash({**ARGS, "amount": "20", "quantity": 1})
    refused = client_for(bob).post(
        reverse("approvals:decide", args=[approval.pk]),
        {
            "decision": "edit",
            "seen_hash": approval.payload_hash,
            "confirmed": "1",
            "previewed": previewed,
            **edited,
        },
    )
    html = refused.content.decode()
    assert refused.status_code in (200, 428)
    assert 'id="edit-diff"' in html  # the diff to confirm is on the page again
    assert 'value="20"' in html
