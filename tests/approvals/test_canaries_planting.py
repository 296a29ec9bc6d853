"""Planting a canary (docs/autonomy.md): who it appears to come from, and which templates a
plan may plant in its tier (none whose tool's real calls never wait there)."""

from __future__ import annotations

import pytest

from agents.runtime.checkpoint import checkpointer_get, thread_config
from approvals.autonomy_models import AutonomyRule
from approvals.models import AgentRun, Canary, RiskTier
from approvals.services import runs
from approvals.services.canaries import (
    CanaryRefused,
    canaries_plant_due,
    canary_plant,
    plan_problem,
    templates_plantable,
)
from tests.approvals.canary_support import plan_for
from tests.support.people import client_for

pytestmark = pytest.mark.django_db


def _real_runs(user, count: int, agent: str = "refund_agent") -> None:
    for _ in range(count):
        runs.run_create(agent=agent, graph_version="1", input={}, requested_by=user, enqueue=False)


def test_a_default_plans_canary_comes_from_the_busiest_requester_who_may_not_decide_it(
    demo_policy, alice, bob, dave
):
    _real_runs(bob, 5)  # the busiest, but a reviewer of tier write: never a canary's requester
    _real_runs(dave, 3)
    _real_runs(alice, 2)
    _real_runs(alice, 9, agent="incident_copilot")  # another agent's runs do not count
    canary = canary_plant(plan=plan_for("write", requested_as=None))
    assert AgentRun.objects.get(pk=canary.run_id).requested_by == dave


def test_canary_runs_do_not_count_as_real_runs_of_their_requester(demo_policy, alice, dave):
    for _ in range(3):
        canary_plant(plan=plan_for("write", requested_as=dave))
    _real_runs(alice, 1)
    canary = canary_plant(plan=plan_for("write", requested_as=None))
    assert AgentRun.objects.get(pk=canary.run_id).requested_by == alice


def test_a_default_plan_without_a_real_requester_plants_nothing_and_says_why(demo_policy, bob):
    _real_runs(bob, 2)  # only a reviewer requests real runs
    plan = plan_for("write", requested_as=None)
    with pytest.raises(CanaryRefused, match="requested as"):
        canary_plant(plan=plan)
    assert canaries_plant_due() == 0
    assert AgentRun.objects.count() == 2 and not Canary.objects.exists()
    assert "requested as" in plan_problem(plan=plan)


def test_a_planted_canarys_thread_holds_the_agents_checkpoints(demo_policy, alice):
    canary = canary_plant(plan=plan_for("write", requested_as=alice))
    run = AgentRun.objects.get(pk=canary.run_id)
    checkpoints = list(checkpointer_get().list(thread_config(run)))
    assert len(checkpoints) > 1
    assert run.steps_used > 0 and run.tokens_used > 0


def test_a_template_whose_tool_never_falls_in_the_plans_tier_is_not_planted(demo_policy):
    plan = plan_for("write", templates=["rollback_wrong_service"])
    assert templates_plantable(plan=plan)[0] == []
    with pytest.raises(CanaryRefused, match="never fall in tier write"):
        canary_plant(plan=plan)
    assert canaries_plant_due() == 0
    with pytest.raises(CanaryRefused, match="never fall in tier write"):
        canary_plant(plan=plan_for("write", is_active=False), template="rollback_wrong_service")
    assert not AgentRun.objects.exists()
    assert "never fall in tier write" in plan_problem(plan=plan)


@pytest.mark.parametrize("mode", [AutonomyRule.Mode.SAMPLED, AutonomyRule.Mode.POST_HOC])
def test_a_tier_rule_that_lets_calls_run_without_waiting_keeps_its_templates_out(demo_policy, mode):
    AutonomyRule.objects.create(tier=RiskTier.objects.get(name="write"), mode=mode)
    plan = plan_for("write")
    assert templates_plantable(plan=plan)[0] == []
    with pytest.raises(CanaryRefused, match="without waiting"):
        canary_plant(plan=plan)
    assert not AgentRun.objects.exists()


def test_a_shadow_rule_still_lets_its_templates_be_planted(demo_policy):
    # Under a shadow rule every real call still waits for a person.
    AutonomyRule.objects.create(tool="refund_order", mode=AutonomyRule.Mode.SHADOW)
    assert templates_plantable(plan=plan_for("write"))[0] == [
        "refund_unknown_account",
        "refund_doubled_amount",
    ]


def test_the_report_says_why_a_plan_plants_nothing(demo_policy, frank):
    plan_for("write", templates=["rollback_wrong_service"])
    page = client_for(frank).get("/canaries/").content.decode()
    assert "plants nothing: rollback_wrong_service: rollback_deploy calls never fall" in page
