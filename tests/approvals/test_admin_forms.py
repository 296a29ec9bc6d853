"""The admin cannot weaken the record: tool policies name registered tools, a tier's allowed
decisions are checkboxes of the known ones, its timing is coherent, and the queue's tier filter
lists the tiers that exist."""

from __future__ import annotations

from typing import Any

import pytest

from approvals import policy
from approvals.models import RiskTier, ToolPolicy
from tests.support.people import client_for

pytestmark = pytest.mark.django_db


def tier_form(demo_policy, **changes: Any) -> dict[str, Any]:
    """The change form of tier "write" as the admin posts it, with ``changes``."""
    return {
        "name": "write",
        "level": 1,
        "requires_approval": "on",
        "allowed_decisions": ["approve", "edit", "reject", "respond"],
        "approver_groups": [demo_policy["approvers-write"].pk],
        "required_approvals": 1,
        "ttl_seconds": 600,
        "remind_before_seconds": 60,
        "escalate_after_seconds": 0,
        "expiry_decision": "reject",
        "email_notifications": "on",
        "webhook_endpoint": "",
    } | changes


def post_tier(admin_client, demo_policy, **changes: Any):
    tier = RiskTier.objects.get(name="write")
    return admin_client.post(
        f"/admin/approvals/risktier/{tier.pk}/change/", tier_form(demo_policy, **changes)
    )


def post_tool_policy(admin_client, tool: str):
    write = RiskTier.objects.get(name="write")
    return admin_client.post(
        "/admin/approvals/toolpolicy/add/",
        {
            "tool": tool,
            "tier": write.pk,
            "note": "",
            "rules-TOTAL_FORMS": 0,
            "rules-INITIAL_FORMS": 0,
            "rules-MIN_NUM_FORMS": 0,
            "rules-MAX_NUM_FORMS": 1000,
        },
    )


def test_a_tool_policy_naming_an_unregistered_tool_is_refused_naming_the_tool(
    demo_policy, admin_client
):
    response = post_tool_policy(admin_client, "refund_ordr")

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "refund_ordr" in errors["tool"][0]
    assert not ToolPolicy.objects.filter(tool="refund_ordr").exists()


def test_a_tool_policy_naming_a_registered_tool_is_saved(demo_policy, admin_client):
    ToolPolicy.objects.filter(tool="notify_channel").delete()

    response = post_tool_policy(admin_client, "notify_channel")

    assert response.status_code == 302, response.content.decode()[:2000]
    assert ToolPolicy.objects.get(tool="notify_channel").tier.name == "write"


def test_allowed_decisions_are_checkboxes_of_the_known_decisions(demo_policy, admin_client):
    tier = RiskTier.objects.get(name="write")

    response = admin_client.get(f"/admin/approvals/risktier/{tier.pk}/change/")

    html = response.content.decode()
    for decision in policy.ALL_DECISIONS:
        assert f'type="checkbox" name="allowed_decisions" value="{decision}"' in html


@pytest.mark.parametrize(
    "allowed", [[], ["approv"], '["approve"]'], ids=["none", "unknown", "raw json"]
)
def test_allowed_decisions_must_be_some_known_ones(demo_policy, admin_client, allowed):
    response = post_tier(admin_client, demo_policy, allowed_decisions=allowed)

    assert response.status_code == 200
    assert "allowed_decisions" in response.context["adminform"].form.errors
    assert policy.tier_allowed_decisions("write") == policy.ALL_DECISIONS


def test_checked_decisions_are_what_the_tier_allows(demo_policy, admin_client):
    response = post_tier(admin_client, demo_policy, allowed_decisions=["reject", "approve"])

    assert response.status_code == 302, response.content.decode()[:2000]
    assert RiskTier.objects.get(name="write").allowed_decisions == ["approve", "reject"]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"required_approvals": 0}, "required_approvals"),
        ({"ttl_seconds": 0}, "ttl_seconds"),
        ({"level": -1}, "level"),
        ({"escalate_after_seconds": 60}, "escalation_group"),
        ({"escalate_after_seconds": 600}, "escalate_after_seconds"),
        ({"remind_before_seconds": 600}, "remind_before_seconds"),
    ],
    ids=str,
)
def test_a_tier_that_would_weaken_the_record_is_refused(demo_policy, admin_client, changes, field):
    before = RiskTier.objects.values().get(name="write")

    response = post_tier(admin_client, demo_policy, **changes)

    assert response.status_code == 200
    assert field in response.context["adminform"].form.errors
    assert RiskTier.objects.values().get(name="write") == before


def test_the_queue_tier_filter_lists_the_tiers_that_exist(demo_policy, bob):
    RiskTier.objects.create(name="payments", level=7)

    response = client_for(bob).get("/")

    choices = [value for value, _ in response.context["form"].fields["tier"].choices]
    assert choices == ["", "read", "write", "critical", "payments"]


def post_rule(admin_client, *, arg: str, op: str, value: str):
    """A policy for refund_order (tier write) with one rule raising it to critical."""
    ToolPolicy.objects.filter(tool="refund_order").delete()
    write, critical = (RiskTier.objects.get(name=n) for n in ("write", "critical"))
    return admin_client.post(
        "/admin/approvals/toolpolicy/add/",
        {
            "tool": "refund_order",
            "tier": write.pk,
            "note": "",
            "rules-TOTAL_FORMS": 1,
            "rules-INITIAL_FORMS": 0,
            "rules-MIN_NUM_FORMS": 0,
            "rules-MAX_NUM_FORMS": 1000,
            "rules-0-position": 0,
            "rules-0-arg": arg,
            "rules-0-op": op,
            "rules-0-value": value,
            "rules-0-tier": critical.pk,
        },
    )


def test_a_rule_on_an_argument_the_tool_does_not_have_is_refused(demo_policy, admin_client):
    # "amout > 1000 -> critical" never matches: large refunds would stay in tier write, as a
    # misspelt tool name once left the tool on its default (the check the tool field has).
    response = post_rule(admin_client, arg="amout", op="gt", value="1000")

    assert response.status_code == 200
    assert not ToolPolicy.objects.filter(tool="refund_order").exists()


@pytest.mark.parametrize("value", ["NaN", "sNaN", "Infinity", "-inf"])
def test_a_rule_threshold_that_no_number_can_cross_is_refused(demo_policy, admin_client, value):
    # Decimal("NaN") passed the rule's number check, but policy._number() reads only finite
    # numbers, so "amount > NaN -> critical" is a rule that never raises anything.
    response = post_rule(admin_client, arg="amount", op="gt", value=value)

    assert response.status_code == 200
    assert not ToolPolicy.objects.filter(tool="refund_order").exists()


def test_a_rule_on_a_real_argument_with_a_number_is_saved(demo_policy, admin_client):
    response = post_rule(admin_client, arg="amount", op="gt", value="1000")

    assert response.status_code == 302
    assert ToolPolicy.objects.get(tool="refund_order").rules.get().arg == "amount"
