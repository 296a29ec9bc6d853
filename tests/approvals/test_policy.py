"""Policy in configuration: tool rules, code-default fallback, audited versioned changes."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from approvals import policy
from approvals.models import ApprovalRequest, PolicyVersion, RiskTier, ToolPolicy
from approvals.services import DecisionForbidden
from audit.models import AuditEvent
from tests.support.approvals import decide, request_approval


def test_refund_order_above_500_is_critical_and_otherwise_write(demo_policy):
    assert (
        policy.tier_for_call(tool="refund_order", args={"amount": "500.00"}, default_tier="read")
        == "write"
    )
    assert (
        policy.tier_for_call(tool="refund_order", args={"amount": "500.01"}, default_tier="read")
        == "critical"
    )
    assert (
        policy.tier_for_call(tool="refund_order", args={"amount": 900}, default_tier="read")
        == "critical"
    )


def test_a_tool_without_policy_keeps_its_code_default(demo_policy):
    assert (
        policy.tier_for_call(tool="create_incident_ticket", args={}, default_tier="write")
        == "write"
    )


def test_without_rows_the_code_defaults_apply(db, settings):
    assert policy.tier_level("critical") == 2
    assert policy.tier_ttl_seconds("write") == settings.APPROVAL_TTL_SECONDS
    assert policy.tier_allowed_decisions("write") == ["approve", "edit", "reject", "respond"]
    assert policy.tier_requires_approval("unknown-tier")


def test_rules_run_in_order_and_the_first_match_wins(demo_policy):
    tool_policy = ToolPolicy.objects.get(tool="refund_order")
    read = RiskTier.objects.get(name="read")
    tool_policy.rules.update(position=5)
    tool_policy.rules.create(position=1, arg="currency", op="eq", value="XTS", tier=read)

    args = {"amount": 900, "currency": "XTS"}
    assert policy.tier_for_call(tool="refund_order", args=args, default_tier="write") == "read"


def test_every_policy_change_is_audited_and_bumps_the_version(demo_policy, admin_client):
    before = PolicyVersion.objects.get(pk=1).number
    tier = RiskTier.objects.get(name="write")

    response = admin_client.post(
        f"/admin/approvals/risktier/{tier.pk}/change/",
        {
            "name": "write",
            "level": 1,
            "requires_approval": "on",
            "allowed_decisions": ["approve", "reject"],
            "approver_groups": [demo_policy["approvers-write"].pk],
            "required_approvals": 1,
            "ttl_seconds": 600,
            "remind_before_seconds": 60,
            "escalate_after_seconds": 0,
            "expiry_decision": "reject",
            "email_notifications": "on",
            "webhook_endpoint": "",
        },
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    assert PolicyVersion.objects.get(pk=1).number == before + 1
    event = AuditEvent.objects.filter(action="policy.changed").latest("seq")
    assert event.data["change"] == "changed"
    assert event.data["policy_version"] == before + 1
    assert event.data["state"]["ttl_seconds"] == 600
    assert event.actor_username == "admin"
    assert policy.tier_allowed_decisions("write") == ["approve", "reject"]


def test_deleting_a_tool_policy_is_audited_too(demo_policy, admin_client):
    tool_policy = ToolPolicy.objects.get(tool="rollback_deploy")
    before = PolicyVersion.objects.get(pk=1).number

    response = admin_client.post(
        f"/admin/approvals/toolpolicy/{tool_policy.pk}/delete/", {"post": "yes"}
    )

    assert response.status_code == 302
    assert not ToolPolicy.objects.filter(tool="rollback_deploy").exists()
    event = AuditEvent.objects.filter(action="policy.changed").latest("seq")
    assert (event.data["change"], event.data["state"]["tool"]) == ("deleted", "rollback_deploy")
    assert PolicyVersion.objects.get(pk=1).number == before + 1


def test_each_approval_records_the_policy_version_it_was_requested_under(demo_policy, alice):
    version = PolicyVersion.objects.get(pk=1).number
    approval = request_approval(requester=alice, tier="write")

    assert approval.policy_version == version > 0
    event = AuditEvent.objects.get(action="approval.requested", approval_id=approval.id)
    assert event.data["policy_version"] == version


def test_the_admin_lists_tiers_tool_policies_and_notifications(demo_policy, admin_client):
    for path in ("risktier", "toolpolicy", "notification", "policyversion"):
        assert admin_client.get(f"/admin/approvals/{path}/").status_code == 200, path


# --- tier escalation by edit ------------------------------------------------------------------


def test_an_edit_into_a_higher_tier_by_a_write_only_approver_is_a_403_naming_the_tier(
    demo_policy, alice, bob
):
    approval = request_approval(
        requester=alice, tier="write", args={"order_id": "A-1", "amount": 120}
    )

    with pytest.raises(DecisionForbidden) as exc:
        decide(approval, bob, decision="edit", args={"order_id": "A-1", "amount": 900})

    assert exc.value.status_code == 403
    assert "tier critical" in exc.value.message
    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.PENDING


def test_the_api_answers_the_edit_into_a_higher_tier_with_403(demo_policy, alice, bob, client):
    approval = request_approval(
        requester=alice, tier="write", args={"order_id": "A-1", "amount": 120}
    )
    client.force_login(bob)

    response = client.post(
        f"/api/approvals/{approval.id}/decision/",
        {
            "decision": "edit",
            "payload_hash": approval.payload_hash,
            "args": {"order_id": "A-1", "amount": 900},
        },
        content_type="application/json",
    )

    assert response.status_code == 403
    assert "critical" in response.json()["detail"]


def test_an_edit_into_a_higher_tier_moves_the_approval_to_that_tiers_rules(
    demo_policy, alice, bob, carol
):
    approval = request_approval(
        requester=alice, tier="write", args={"order_id": "A-1", "amount": 120}
    )
    old_hash = approval.payload_hash
    critical = RiskTier.objects.get(name="critical")

    moved = decide(approval, carol, decision="edit", args={"order_id": "A-1", "amount": 900})

    # Critical needs two approvals (one of approvers-critical): carol's edit is the first.
    assert moved.status == ApprovalRequest.Status.PENDING
    assert moved.tier == "critical"
    assert moved.args == {"order_id": "A-1", "amount": 900}
    assert moved.payload["tier"] == "critical"
    assert moved.payload_hash != old_hash
    assert moved.quorum_round == 1
    # The critical tier's expiry (15 minutes), counted from the edit, not the write tier's 20.
    left = (moved.expires_at - timezone.now()).total_seconds()
    assert critical.ttl_seconds - 30 < left <= critical.ttl_seconds
    assert AuditEvent.objects.filter(action="approval.tier_raised", approval_id=moved.id).exists()

    final = decide(approval, bob)

    assert final.status == ApprovalRequest.Status.EDITED
    assert final.decision["tier"] == "critical"
    assert final.decision["args"] == {"order_id": "A-1", "amount": 900}
    assert final.decision["by"] == "carol, bob"


def test_earlier_votes_lapse_when_an_edit_raises_the_tier(demo_policy, alice, bob, carol, erin):
    RiskTier.objects.filter(name="write").update(required_approvals=2)
    erin.groups.add(demo_policy["approvers-write"])
    approval = request_approval(
        requester=alice, tier="write", args={"order_id": "A-1", "amount": 120}
    )
    decide(approval, bob)  # 1 of 2 in tier write, for amount 120

    moved = decide(approval, carol, decision="edit", args={"order_id": "A-1", "amount": 900})
    assert (moved.status, moved.tier) == (ApprovalRequest.Status.PENDING, "critical")

    final = decide(approval, erin)

    # Bob's vote was for another proposal in another tier: it does not count.
    assert final.status == ApprovalRequest.Status.EDITED
    assert final.decision["by"] == "carol, erin"


def test_an_edit_within_the_tier_is_fine_for_a_write_approver(demo_policy, alice, bob):
    approval = request_approval(
        requester=alice, tier="write", args={"order_id": "A-1", "amount": 120}
    )

    decided = decide(approval, bob, decision="edit", args={"order_id": "A-1", "amount": 450})

    assert decided.status == ApprovalRequest.Status.EDITED


def test_admin_user_fixture_is_not_an_approver(demo_policy, alice, admin_user):
    approval = request_approval(requester=alice, tier="critical")
    assert not User.objects.get(pk=admin_user.pk).groups.exists()
    with pytest.raises(DecisionForbidden):
        decide(approval, admin_user)


def test_an_edit_into_a_tier_that_does_not_allow_edits_is_refused(demo_policy, alice, carol):
    RiskTier.objects.filter(name="critical").update(allowed_decisions=["approve", "reject"])
    approval = request_approval(
        requester=alice, tier="write", args={"order_id": "A-1", "amount": 120}
    )
    with pytest.raises(DecisionForbidden, match="does not allow edits"):
        decide(approval, carol, decision="edit", args={"order_id": "A-1", "amount": 900})
    approval.refresh_from_db()
    assert (approval.tier, approval.status) == ("write", ApprovalRequest.Status.PENDING)


def test_a_raised_approval_takes_only_decisions_its_new_tier_allows(demo_policy, alice, carol):
    RiskTier.objects.filter(name="critical").update(allowed_decisions=["approve", "edit", "reject"])
    approval = request_approval(
        requester=alice, tier="write", args={"order_id": "A-1", "amount": 120}
    )
    moved = decide(approval, carol, decision="edit", args={"order_id": "A-1", "amount": 900})
    assert moved.allowed_decisions == ["approve", "edit", "reject"]
    assert moved.payload["allowed_decisions"] == ["approve", "edit", "reject"]
