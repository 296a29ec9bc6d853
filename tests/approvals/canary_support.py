"""Shared helpers of the canary tests: a plan and a planted canary."""

from __future__ import annotations

import random

from django.contrib.auth import get_user_model

from approvals.canary_templates import TEMPLATES
from approvals.models import Canary, CanaryPlan, RiskTier
from approvals.services.canaries import CanaryRefused, canary_plant, canary_requester


def requester():
    """alice when she exists (a requester who decides nothing), else a plain user."""
    user = get_user_model().objects.filter(username="alice").first()
    return user or get_user_model().objects.get_or_create(username="requester")[0]


def plan_for(tier: str = "write", **fields) -> CanaryPlan:
    """A plan of ``tier``; its runs come from ``requester()`` unless ``requested_as`` is given
    (None: the default, whoever requests the most real runs)."""
    fields.setdefault("requested_as", requester())
    return CanaryPlan.objects.create(tier=RiskTier.objects.get(name=tier), **fields)


def plant(template: str = "refund_doubled_amount", *, tier: str = "write", plan=None) -> Canary:
    """A canary of ``plan``, else of a default plan of ``tier`` (its requester: whoever requests
    the most real runs and may not decide it) when it has one, else of one whose runs come from
    ``requester()``."""
    if plan is None:
        plan = plan_for(tier, requested_as=None)
        try:
            canary_requester(plan=plan, agent=TEMPLATES[template].agent)
        except CanaryRefused:
            plan.requested_as = requester()
            plan.save(update_fields=["requested_as"])
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
