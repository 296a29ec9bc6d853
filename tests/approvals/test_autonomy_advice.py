"""The autonomy advice (approvals/advice.py) on generated data, against figures computed by
hand in each test: promote, keep, demote, and the thresholds held exactly at their value."""

from __future__ import annotations

from fractions import Fraction

import pytest

from approvals.advice import Advice, Figures, Thresholds, advise
from approvals.advice_selectors import (
    AdviceWindowInvalid,
    advice_days,
    autonomy_advice_for,
    autonomy_advice_report,
)
from approvals.autonomy_models import AutonomyRule
from approvals.models import RiskTier
from tests.support.autonomy_advice import autonomous_actions, closed_approvals, shadow_verdicts
from tests.support.factories import RunFactory

pytestmark = pytest.mark.django_db

DEFAULTS = Thresholds(
    promote_approve_rate=Fraction("0.95"),
    promote_min_volume=50,
    demote_reject_rate=Fraction("0.20"),
    demote_undo_rate=Fraction("0.05"),
)


def _advice(mode: str = "ask", **outcomes: int) -> Advice:
    figures = Figures()
    figures.outcomes.update(outcomes)
    return Advice(scope="tool", key="refund_order", mode=mode, mode_from="", figures=figures)


def _rule(tool: str = "refund_order", mode: str = "sampled") -> AutonomyRule:
    return AutonomyRule.objects.create(tool=tool, mode=mode)


# --- on generated data, through the rollups ----------------------------------------------------


def test_58_approved_1_edited_1_rejected_of_60_is_promoted_to_sampled(bob):
    closed_approvals(by=bob, approve=58, edit=1, reject=1)

    advice, _ = autonomy_advice_for(scope="tool", key="refund_order")

    # 58 / 60 = 0.9667 >= 0.95; volume 60 >= 50; no unsafe rejection.
    assert advice.figures.volume == 60
    assert advice.figures.share("approve") == Fraction(58, 60)
    assert (advice.recommendation, advice.target_mode) == ("promote", "sampled")
    assert advice.evidence_words == [
        "approve rate 96.7% (58 of 60) ≥ 95.0%",
        "volume 60 ≥ 50 decisions by a person",
        "no severe (unsafe) rejection",
    ]


def test_49_approvals_all_approved_are_kept_for_too_little_volume(bob):
    closed_approvals(by=bob, approve=49)

    advice, _ = autonomy_advice_for(scope="tool", key="refund_order")

    assert advice.figures.share("approve") == 1
    assert advice.recommendation == "keep"
    assert "volume 49 < 50 decisions by a person" in advice.evidence_words


def test_exactly_50_approvals_reach_the_minimum_volume(bob):
    closed_approvals(by=bob, approve=50)

    advice, _ = autonomy_advice_for(scope="tool", key="refund_order")

    assert advice.recommendation == "promote"
    assert "volume 50 ≥ 50 decisions by a person" in advice.evidence_words


def test_one_unsafe_rejection_keeps_a_class_that_otherwise_would_be_promoted(bob):
    # 59 / 60 = 98.3% approved, volume 60, but one rejection would have caused harm.
    closed_approvals(by=bob, approve=59, reject=1, reasons={"unsafe": 1})

    advice, _ = autonomy_advice_for(scope="tool", key="refund_order")

    assert advice.figures.severe == 1
    assert advice.figures.reasons["unsafe"] == 1
    assert advice.recommendation == "keep"
    assert "1 severe (unsafe) rejection" in advice.evidence_words


def test_12_of_50_rejected_demotes_a_sampled_tool_to_ask(bob):
    _rule(mode="sampled")
    closed_approvals(by=bob, approve=38, reject=12)

    advice, _ = autonomy_advice_for(scope="tool", key="refund_order")

    # 12 / 50 = 0.24 >= 0.20.
    assert advice.mode == "sampled"
    assert (advice.recommendation, advice.target_mode) == ("demote", "ask")
    assert "reject rate 24.0% (12 of 50) ≥ 20.0%" in advice.evidence_words


def test_an_undo_share_of_3_in_40_demotes_a_post_hoc_tool(bob):
    _rule(mode="post_hoc")
    run = RunFactory(requested_by=bob)
    autonomous_actions(run=run, fine=37, undone=3, pending=5, not_sampled=20)

    advice, _ = autonomy_advice_for(scope="tool", key="refund_order")

    # 3 / 40 reviewed = 7.5% >= 5%; pending and not sampled actions are not reviewed.
    assert (advice.figures.reviewed, advice.figures.undone) == (40, 3)
    assert advice.figures.undo_share == Fraction(3, 40)
    assert advice.recommendation == "demote"
    assert "undo share 7.5% (3 of 40 reviewed) ≥ 5.0%" in advice.evidence_words


def test_a_tool_without_its_own_rule_takes_its_tiers_mode(bob):
    tier = RiskTier.objects.create(name="write", level=1)
    AutonomyRule.objects.create(tier=tier, mode="sampled")
    closed_approvals(by=bob, approve=40, reject=10)

    advice, _ = autonomy_advice_for(scope="tool", key="refund_order")

    assert (advice.mode, advice.mode_from, advice.tier) == ("sampled", "tier", "write")
    assert advice.recommendation == "demote"  # 10 / 50 = exactly 20%


def test_the_tier_row_adds_up_its_tools_and_expiries_are_not_volume(bob):
    closed_approvals(by=bob, tool="refund_order", approve=30, reject=2, reasons={"wrong_amount": 2})
    closed_approvals(by=bob, tool="send_email", approve=20, respond=1, expired=3)
    closed_approvals(by=bob, tool="rollback", tier="critical", approve=5)

    report = autonomy_advice_report()
    write = report.find(scope="tier", key="write")

    assert write.figures.volume == 53  # 30 + 2 + 20 + 1; the 3 expired are not decisions
    assert write.figures.closed == 56
    assert write.figures.share("expired") == Fraction(3, 56)
    assert write.figures.share("respond") == Fraction(1, 53)
    assert write.figures.reasons["wrong_amount"] == 2
    assert [a.key for a in report.tools] == ["refund_order", "send_email", "rollback"]


def test_the_median_time_to_decision_comes_from_the_rollups_within_one_percent(bob):
    closed_approvals(by=bob, approve=3, seconds=100)
    closed_approvals(by=bob, approve=2, seconds=5000)

    advice, _ = autonomy_advice_for(scope="tool", key="refund_order")

    assert advice.figures.median_seconds == pytest.approx(100, rel=0.01)


def test_the_shadow_agreement_is_agreed_over_decided_verdicts(bob):
    _rule(mode="shadow")
    approvals = closed_approvals(by=bob, approve=8, edit=2)
    shadow_verdicts(approvals=approvals, agreed=8)

    advice, _ = autonomy_advice_for(scope="tool", key="refund_order")

    assert (advice.figures.shadow_agreed, advice.figures.shadow_decided) == (8, 10)
    assert advice.figures.as_dict()["shadow_agreement"] == 0.8


def test_the_report_reads_a_fixed_number_of_queries_however_much_data(
    bob, django_assert_max_num_queries
):
    closed_approvals(by=bob, approve=30, reject=3, reasons={"other": 3})
    run = RunFactory(requested_by=bob)
    autonomous_actions(run=run, fine=10, undone=1)

    with django_assert_max_num_queries(9):
        autonomy_advice_report()


def test_thresholds_come_from_the_settings(bob, settings):
    settings.AUTONOMY_PROMOTE_MIN_VOLUME = 10
    settings.AUTONOMY_PROMOTE_APPROVE_RATE = 0.9
    closed_approvals(by=bob, approve=9, reject=1)

    advice, report = autonomy_advice_for(scope="tool", key="refund_order")

    assert report.thresholds.promote_min_volume == 10
    assert advice.recommendation == "promote"  # 9 / 10 = exactly 90%, volume exactly 10


# --- the comparisons, at their thresholds ------------------------------------------------------


@pytest.mark.parametrize(
    ("approve", "edit", "expected"),
    [(57, 3, "promote"), (56, 4, "keep")],  # 57/60 = 95.0% exactly; 56/60 = 93.3%
)
def test_the_approve_rate_holds_exactly_at_its_threshold(approve, edit, expected):
    advice = advise(_advice(approve=approve, edit=edit), thresholds=DEFAULTS)
    assert advice.recommendation == expected


@pytest.mark.parametrize(
    ("reject", "expected"),
    [(10, "demote"), (9, "keep")],  # 10/50 = 20% exactly; 9/50 = 18%
)
def test_the_reject_rate_holds_exactly_at_its_threshold(reject, expected):
    advice = advise(_advice("sampled", approve=50 - reject, reject=reject), thresholds=DEFAULTS)
    assert advice.recommendation == expected


@pytest.mark.parametrize(("undone", "expected"), [(2, "demote"), (1, "keep")])  # 2/40 = 5%
def test_the_undo_share_holds_exactly_at_its_threshold(undone, expected):
    advice = _advice("post_hoc", approve=1)
    advice.figures.reviews.update(fine=40 - undone, undone=undone)
    assert advise(advice, thresholds=DEFAULTS).recommendation == expected


def test_an_undo_that_failed_or_is_under_way_counts_as_undone():
    figures = Figures()
    figures.reviews.update(fine=17, undoing=1, undo_failed=1, undone=1)
    assert figures.undo_share == Fraction(3, 20)


def test_a_class_that_already_runs_is_never_promoted_and_one_that_asks_never_demoted():
    running = advise(_advice("sampled", approve=100), thresholds=DEFAULTS)
    asking = advise(_advice("ask", approve=10, reject=90), thresholds=DEFAULTS)
    assert (running.recommendation, asking.recommendation) == ("keep", "keep")


def test_a_shadow_class_may_be_promoted_like_one_that_asks():
    advice = advise(_advice("shadow", approve=60), thresholds=DEFAULTS)
    assert (advice.recommendation, advice.target_mode) == ("promote", "sampled")


def test_nothing_measured_says_so_and_keeps():
    advice = advise(_advice("sampled"), thresholds=DEFAULTS)
    assert advice.recommendation == "keep"
    assert advice.evidence_words == [
        "no decisions by a person to compute a reject rate",
        "no reviewed autonomous actions to compute an undo share",
    ]


@pytest.mark.parametrize("raw", ["0", "366", "x", "1.5"])
def test_a_window_outside_1_to_365_days_is_refused(raw):
    with pytest.raises(AdviceWindowInvalid):
        advice_days(raw)


def test_the_default_window_is_the_setting(settings):
    settings.AUTONOMY_ADVICE_WINDOW_DAYS = 7
    assert advice_days(None) == 7
