"""Shared helpers of the canary tests: a plan and a planted canary."""

from __future__ import annotations

import random

from approvals.models import Canary, CanaryPlan, RiskTier
from approvals.services.canaries import canary_plant


def plan_for(tier: str = "write", **fields) -> CanaryPlan:
    return CanaryPlan.objects.create(tier=RiskTier.objects.get(name=tier), **fields)


def plant(template: str = "refund_doubled_amount", *, tier: str = "write", plan=None) -> Canary:
    plan = plan or plan_for(tier)
    return canary_plant(plan=plan, template=template, rng=random.Random(7))


def policy_seeded(people) -> dict:
    """The demo tiers with bob in approvers-write and carol in both approver groups (as the
    approvals tests' demo_policy fixture)."""
    from django.contrib.auth.models import Group

    from approvals.services import policy_seed_demo

    policy_seed_demo()
    groups = {g.name: g for g in Group.objects.all()}
    people["bob"].groups.add(groups["approvers-write"])
    people["carol"].groups.add(groups["approvers-write"], groups["approvers-critical"])
    return groups
