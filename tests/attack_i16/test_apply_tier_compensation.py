"""Attack: applying advice promotes a tier the admin refuses to promote, because the apply
checks only the tier's tool policies and past approvals, not every registered tool that falls
in the tier (by its code default tier or an argument rule)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from approvals.autonomy import tier_tools, tool_has_compensation, without_compensation
from approvals.autonomy_models import AutonomyRule
from approvals.models import RiskTier
from tests.support.autonomy_advice import closed_approvals
from tests.support.people import client_for

pytestmark = pytest.mark.django_db


def test_applying_a_tier_promotion_is_refused_when_a_tool_of_the_tier_has_no_compensation(
    admin, bob
):
    # Every past decision of tier write was of a tool that can be undone: advice says promote.
    assert tool_has_compensation("create_incident_ticket")
    closed_approvals(by=bob, tool="create_incident_ticket", approve=59, edit=1)
    # A deployment whose tiers exist but whose tools keep their code default tiers (no policy).
    write = RiskTier.objects.get_or_create(name="write", defaults={"level": 1})[0]
    lacking = without_compensation(tier_tools(write))
    assert lacking  # e.g. refund_order, notify_customer: the admin refuses this very rule

    response = client_for(admin).post(
        reverse("autonomy-apply"), {"scope": "tier:write", "target_mode": "sampled"}
    )

    assert not AutonomyRule.objects.filter(tier=write, mode="sampled").exists(), (
        f"tier write promoted to sampled ({response.status_code}) although {lacking} "
        "cannot be undone"
    )
