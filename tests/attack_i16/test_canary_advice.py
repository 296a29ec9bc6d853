"""Attack: canaries are left out of the approval metrics, but not out of the advice's direct
figures. A careful reviewer rejects a canary as "unsafe" (it would have caused harm), and that
severe rejection then keeps the canary's tool from ever being promoted; under a shadow rule a
caught canary records a disagreement with the policy, dragging the shadow agreement down."""

from __future__ import annotations

import pytest

from approvals.advice_selectors import autonomy_advice_for
from approvals.autonomy_models import AutonomyRule
from approvals.models import ApprovalRequest
from tests.approvals.canary_support import plant, policy_seeded
from tests.support.approvals import decide
from tests.support.autonomy_advice import closed_approvals, shadow_verdicts

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("queued")]


@pytest.fixture
def demo_policy(alice, bob, carol, dave) -> dict:
    return policy_seeded({"bob": bob, "carol": carol})


def test_a_canary_caught_as_unsafe_does_not_keep_its_tool_from_being_promoted(demo_policy, bob):
    closed_approvals(by=bob, approve=60)
    before, _ = autonomy_advice_for(scope="tool", key="refund_order")
    assert before.recommendation == "promote"

    canary = plant("refund_unknown_account")
    decide(ApprovalRequest.objects.get(pk=canary.approval_id), bob, "reject", reason="unsafe")
    canary.refresh_from_db()
    assert canary.outcome == "caught"

    after, _ = autonomy_advice_for(scope="tool", key="refund_order")
    assert after.figures.severe == 0  # a test proposal is not a measured rejection
    assert after.recommendation == "promote"


def test_a_canary_decided_under_a_shadow_rule_is_not_counted_in_the_shadow_agreement(
    demo_policy, bob
):
    AutonomyRule.objects.create(tool="refund_order", mode=AutonomyRule.Mode.SHADOW)
    real = closed_approvals(by=bob, approve=10)
    shadow_verdicts(approvals=real, agreed=10)

    canary = plant("refund_doubled_amount")
    decide(ApprovalRequest.objects.get(pk=canary.approval_id), bob, "reject")

    advice, _ = autonomy_advice_for(scope="tool", key="refund_order")
    assert (advice.figures.shadow_agreed, advice.figures.shadow_decided) == (10, 10)
