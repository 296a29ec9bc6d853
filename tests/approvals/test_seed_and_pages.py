"""The seeded demo policy and the quorum progress on the approval page."""

from __future__ import annotations

from django.core.management import call_command

from approvals.models import PolicyVersion, RiskTier, ToolPolicy
from approvals.services import policy_seed_demo
from tests.support.approvals import decide, request_approval


def test_seed_demo_configures_read_write_and_critical(db):
    call_command("seed_demo", verbosity=0)

    tiers = {t.name: t for t in RiskTier.objects.prefetch_related("approver_groups")}
    assert not tiers["read"].requires_approval
    assert {g.name for g in tiers["write"].approver_groups.all()} == {"approvers-write"}
    assert tiers["write"].required_approvals == 1
    assert tiers["critical"].required_approvals == 2
    assert tiers["critical"].required_group.name == "approvers-critical"
    # Short enough to watch in a demo, long enough to click first.
    for name in ("write", "critical"):
        assert 10 * 60 <= tiers[name].ttl_seconds <= 30 * 60
        assert 0 < tiers[name].escalate_after_seconds < tiers[name].ttl_seconds
    rule = ToolPolicy.objects.get(tool="refund_order").rules.get()
    assert (rule.arg, rule.op, rule.value, rule.tier.name) == ("amount", "gt", "500", "critical")


def test_seeding_again_changes_nothing_and_keeps_the_version(db):
    policy_seed_demo()
    version = PolicyVersion.objects.get(pk=1).number

    assert policy_seed_demo() == []
    assert PolicyVersion.objects.get(pk=1).number == version


def test_the_detail_page_shows_real_quorum_progress(demo_policy, alice, bob, client):
    approval = request_approval(requester=alice, tier="critical")
    decide(approval, bob)
    client.force_login(bob)

    html = client.get(f"/approvals/{approval.id}/").content.decode()

    assert "1 of 2</strong> approvals needed" in html
    assert "Approved by bob" in html
    assert "must come from approvers-critical" in html
