"""Shadow mode: what the shadow rule would have done is recorded when the approval is created
(approval_requests_sync), and whether the person agreed when they decide it."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from approvals.autonomy import autonomy_verdict
from approvals.autonomy_models import AutonomyRule, ShadowVerdict
from approvals.models import ApprovalRequest, RiskTier
from approvals.services.sweep import approval_expire
from tests.support.approvals import decide, request_approval

pytestmark = pytest.mark.django_db


def _shadow(*, tool: str = "refund_order", threshold: str | None = "0.8") -> AutonomyRule:
    return AutonomyRule.objects.create(
        tool=tool, mode="shadow", confidence_below=Decimal(threshold) if threshold else None
    )


def _requested(alice, confidence=None, **kwargs) -> ApprovalRequest:
    extra = {} if confidence is None else {"confidence": confidence}
    return request_approval(requester=alice, tier="write", extra_payload=extra, **kwargs)


def test_a_confident_call_under_a_shadow_rule_would_have_run(alice):
    rule = _shadow()
    approval = _requested(alice, confidence=0.9)

    verdict = ShadowVerdict.objects.get(approval=approval)
    assert (verdict.would, verdict.rule, verdict.agreed) == ("run", rule, None)
    assert (verdict.tool, verdict.tier) == ("refund_order", "write")


@pytest.mark.parametrize("confidence", [0.5, None, "high"])
def test_a_call_below_the_threshold_or_without_a_confidence_would_have_asked(alice, confidence):
    _shadow()
    approval = _requested(alice, confidence=confidence)
    assert ShadowVerdict.objects.get(approval=approval).would == "ask"


def test_the_recorded_verdict_is_what_the_gate_would_compute(alice):
    _shadow()
    for confidence in (0.79, 0.8, 0.95):
        approval = _requested(alice, confidence=confidence)
        told = autonomy_verdict(tool="refund_order", tier="write", key="k", confidence=confidence)
        assert ShadowVerdict.objects.get(approval=approval).would == told.shadow_would


def test_a_tiers_shadow_rule_covers_its_tools_unless_a_tool_rule_says_otherwise(alice):
    write = RiskTier.objects.create(name="write", level=1)
    AutonomyRule.objects.create(tier=write, mode="shadow")
    AutonomyRule.objects.create(tool="send_email", mode="ask")

    covered = _requested(alice, confidence=0.99)
    overridden = _requested(alice, tool="send_email")

    assert ShadowVerdict.objects.get(approval=covered).would == "run"  # no threshold: run
    assert not ShadowVerdict.objects.filter(approval=overridden).exists()


def test_no_shadow_rule_records_nothing(alice):
    AutonomyRule.objects.create(tool="refund_order", mode="ask")
    _requested(alice, confidence=0.99)
    assert not ShadowVerdict.objects.exists()


@pytest.mark.parametrize(
    ("confidence", "decision", "agreed"),
    [
        (0.9, "approve", True),  # would run, approved unchanged
        (0.9, "reject", False),
        (0.9, "edit", False),  # approved only after a change: running would have been wrong
        (0.5, "reject", True),  # would ask, and the person did not just approve
        (0.5, "respond", True),
        (0.5, "approve", False),  # asked for nothing: it could have run
    ],
)
def test_the_decision_settles_whether_the_person_agreed(
    demo_policy, alice, bob, confidence, decision, agreed
):
    _shadow()
    approval = _requested(alice, confidence=confidence)
    extra = {"args": {"order_id": "A-1", "amount": 60}} if decision == "edit" else {}
    if decision in ("reject", "respond"):
        extra["message"] = "No."

    decide(approval, bob, decision, **extra)

    verdict = ShadowVerdict.objects.get(approval=approval)
    assert verdict.agreed is agreed
    assert verdict.decided_at is not None


def test_an_expired_approval_leaves_the_agreement_undecided(demo_policy, alice):
    _shadow()
    approval = _requested(alice, confidence=0.9, ttl=dt.timedelta(seconds=1))

    assert approval_expire(approval_id=approval.pk, now=approval.expires_at + dt.timedelta(1))

    approval.refresh_from_db()
    assert approval.status != "pending"
    assert ShadowVerdict.objects.get(approval=approval).agreed is None
