"""Attack: "always ask when the agent's stated confidence is below T" must hold for every value
below T, not only for those that stay below T after rounding to three decimals."""

from __future__ import annotations

from decimal import Decimal

import pytest

from approvals.autonomy import autonomy_verdict
from approvals.autonomy_models import AutonomyRule

pytestmark = pytest.mark.django_db


def test_a_confidence_just_below_the_threshold_asks_a_person():
    AutonomyRule.objects.create(
        tool="create_incident_ticket",
        mode="sampled",
        sample_percent=100,
        confidence_below=Decimal("0.8"),
    )
    verdict = autonomy_verdict(
        tool="create_incident_ticket", tier="write", key="t:call-1", confidence=0.7995
    )
    assert not verdict.run, "0.7995 < 0.8 yet the call runs without waiting (rounded to 0.800)"
