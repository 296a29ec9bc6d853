"""The first hostile review's design notes, each a hole until fixed: a tool's autonomy rule
governed calls an argument rule raised into a stricter tier (escaping its quorum), a sampled
rule could review 0 %, and advice could start shadow mode for a tool nobody registered."""

from __future__ import annotations

import pytest

from approvals.autonomy_admin import AutonomyRuleAdminForm
from approvals.autonomy_models import AutonomousAction, AutonomyRule
from approvals.models import RiskTier, ToolPolicy, ToolPolicyRule
from approvals.services.autonomy_advice import AutonomyError, autonomy_advice_apply
from tests.agents.test_autonomy_gate import ask
from tests.support.factories import RunFactory

pytestmark = pytest.mark.django_db(transaction=True)

TICKET = {"service": "checkout", "title": "5xx", "body": "errors"}


@pytest.fixture
def tiers() -> tuple[RiskTier, RiskTier]:
    write = RiskTier.objects.create(name="write", level=1)
    critical = RiskTier.objects.create(name="critical", level=2, required_approvals=2)
    policy = ToolPolicy.objects.create(tool="create_incident_ticket", tier=write)
    ToolPolicyRule.objects.create(
        policy=policy, arg="severity", op="eq", value="sev1", tier=critical
    )
    return write, critical


def test_a_tool_rule_does_not_let_a_call_raised_into_a_stricter_tier_run_unasked(alice, tiers):
    AutonomyRule.objects.create(tool="create_incident_ticket", mode="post_hoc")
    usual = RunFactory(agent="incident_copilot", requested_by=alice)
    raised = RunFactory(agent="incident_copilot", requested_by=alice)

    ran, _ = ask(usual, args={**TICKET, "severity": "sev3"})
    waits, pending = ask(raised, args={**TICKET, "severity": "sev1"})

    assert ran["by"] == "policy:post_hoc"  # its usual calls run without waiting
    assert waits is None and len(pending) == 1  # the sev1 call waits for critical's quorum
    assert pending[0].value["tier"] == "critical"
    assert AutonomousAction.objects.count() == 1


def test_a_raised_call_follows_the_raised_tiers_own_rule(alice, tiers):
    AutonomyRule.objects.create(tool="", tier=tiers[1], mode="post_hoc")
    run = RunFactory(agent="incident_copilot", requested_by=alice)
    ran, _ = ask(run, args={**TICKET, "severity": "sev1"})
    assert ran["by"] == "policy:post_hoc"


def test_the_admin_refuses_a_sampled_rule_that_reviews_nothing(tiers):
    form = AutonomyRuleAdminForm(
        data={
            "tool": "create_incident_ticket",
            "mode": "sampled",
            "sample_percent": "0",
            "evidence": "{}",
        }
    )
    assert not form.is_valid()
    assert "sample_percent" in form.errors


def test_advice_refuses_a_0_percent_sample_and_an_unregistered_tool(admin, tiers):
    with pytest.raises(AutonomyError) as zero:
        autonomy_advice_apply(
            user=admin,
            scope="tool:create_incident_ticket",
            target_mode="shadow",
            sample_percent="0",
        )
    with pytest.raises(AutonomyError) as unknown:
        autonomy_advice_apply(user=admin, scope="tool:zzz", target_mode="shadow")
    assert "sample_percent" in zero.value.errors
    assert "scope" in unknown.value.errors
    assert not AutonomyRule.objects.exists()
