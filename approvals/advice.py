"""Graduated autonomy's advice (docs/autonomy.md): promote, demote or keep a class of calls
(a tool, or a tier), from what people measurably did with it. Pure computation: the figures
come from ``approvals.advice_selectors``; this module only compares them with the thresholds.

Definitions:

- volume: the class's closed approvals decided by a person (approve, edit, reject, respond);
- the approve, edit, reject and respond rates are shares of that volume; the expire rate is the
  share of all closed approvals (volume + expired) that expired;
- a severe rejection is one whose reason is ``unsafe`` ("would have caused harm");
- reviewed autonomous actions are those reviewed after the fact (fine, undoing, undone, undo
  failed); the undo share is (undoing + undone + undo failed) / reviewed;
- the shadow agreement is agreed / decided shadow verdicts.

Advice: a class that asks (or shadows) is promoted to ``sampled`` when its approve rate is at
least AUTONOMY_PROMOTE_APPROVE_RATE, its volume at least AUTONOMY_PROMOTE_MIN_VOLUME and it had
no severe rejection. A class that runs without waiting (sampled, post_hoc) is demoted to ``ask``
when its reject rate is at least AUTONOMY_DEMOTE_REJECT_RATE or its undo share at least
AUTONOMY_DEMOTE_UNDO_RATE. Anything else: keep. Comparisons are exact (fractions), so a rate
exactly at its threshold holds.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from django.conf import settings

from approvals.autonomy_models import AutonomyRule
from approvals.models import ApprovalRequest

Mode = AutonomyRule.Mode
OUTCOMES: tuple[str, ...] = ("approve", "edit", "reject", "respond", "expired")
PERSON_OUTCOMES: tuple[str, ...] = ("approve", "edit", "reject", "respond")
REASONS: tuple[str, ...] = tuple(ApprovalRequest.RejectReason.values)
SEVERE = ApprovalRequest.RejectReason.UNSAFE.value
WRONG_REVIEWS: tuple[str, ...] = ("undoing", "undone", "undo_failed")
REVIEWED: tuple[str, ...] = ("fine", *WRONG_REVIEWS)
ASKING = (Mode.ASK, Mode.SHADOW)
RUNNING = (Mode.SAMPLED, Mode.POST_HOC)
PROMOTE, DEMOTE, KEEP = "promote", "demote", "keep"
SCOPES: tuple[str, ...] = ("tool", "tier")


@dataclass(frozen=True)
class Thresholds:
    promote_approve_rate: Fraction
    promote_min_volume: int
    demote_reject_rate: Fraction
    demote_undo_rate: Fraction

    @classmethod
    def from_settings(cls) -> Thresholds:
        return cls(
            promote_approve_rate=Fraction(str(settings.AUTONOMY_PROMOTE_APPROVE_RATE)),
            promote_min_volume=int(settings.AUTONOMY_PROMOTE_MIN_VOLUME),
            demote_reject_rate=Fraction(str(settings.AUTONOMY_DEMOTE_REJECT_RATE)),
            demote_undo_rate=Fraction(str(settings.AUTONOMY_DEMOTE_UNDO_RATE)),
        )

    def as_dict(self) -> dict[str, float | int]:
        return {
            "promote_approve_rate": float(self.promote_approve_rate),
            "promote_min_volume": self.promote_min_volume,
            "demote_reject_rate": float(self.demote_reject_rate),
            "demote_undo_rate": float(self.demote_undo_rate),
        }


@dataclass
class Figures:
    """What was measured of one class over the window."""

    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    reasons: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    median_seconds: float | None = None
    reviews: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REVIEWED, 0))
    shadow_decided: int = 0
    shadow_agreed: int = 0

    @property
    def volume(self) -> int:
        return sum(self.outcomes[name] for name in PERSON_OUTCOMES)

    @property
    def closed(self) -> int:
        return self.volume + self.outcomes["expired"]

    def share(self, outcome: str) -> Fraction | None:
        whole = self.closed if outcome == "expired" else self.volume
        return Fraction(self.outcomes[outcome], whole) if whole else None

    @property
    def severe(self) -> int:
        return self.reasons[SEVERE]

    @property
    def reviewed(self) -> int:
        return sum(self.reviews.values())

    @property
    def undone(self) -> int:
        return sum(self.reviews[name] for name in WRONG_REVIEWS)

    @property
    def undo_share(self) -> Fraction | None:
        return Fraction(self.undone, self.reviewed) if self.reviewed else None

    @property
    def shadow_agreement(self) -> Fraction | None:
        return Fraction(self.shadow_agreed, self.shadow_decided) if self.shadow_decided else None

    def as_dict(self) -> dict[str, Any]:
        def number(value: Fraction | None) -> float | None:
            return None if value is None else round(float(value), 4)

        return {
            "volume": self.volume,
            "closed": self.closed,
            "outcomes": dict(self.outcomes),
            "rates": {name: number(self.share(name)) for name in OUTCOMES},
            "reasons": dict(self.reasons),
            "severe_rejections": self.severe,
            "median_seconds": None
            if self.median_seconds is None
            else round(self.median_seconds, 1),
            "reviewed": self.reviewed,
            "undone": self.undone,
            "undo_share": number(self.undo_share),
            "shadow_decided": self.shadow_decided,
            "shadow_agreed": self.shadow_agreed,
            "shadow_agreement": number(self.shadow_agreement),
        }


@dataclass
class Advice:
    """The advice for one class: its current mode, figures, recommendation and why."""

    scope: str  # "tool" | "tier"
    key: str
    mode: str
    mode_from: str  # "tool", "tier" (the tool's tier's rule) or "" (no rule: ask)
    figures: Figures
    recommendation: str = KEEP
    target_mode: str = ""
    evidence_words: list[str] = field(default_factory=list)
    tier: str = ""  # a tool's tier (its policy's, else its latest approval's)

    @property
    def ref(self) -> str:
        return f"{self.scope}:{self.key}"

    @property
    def may_start_shadow(self) -> bool:
        return self.mode == Mode.ASK

    def evidence(self, *, thresholds: Thresholds, window: dict[str, Any]) -> dict[str, Any]:
        """What a rule applied from this advice keeps as its evidence."""
        return {
            "scope": self.scope,
            "key": self.key,
            "mode": self.mode,
            "recommendation": self.recommendation,
            "target_mode": self.target_mode,
            "figures": self.figures.as_dict(),
            "thresholds": thresholds.as_dict(),
            "window": window,
            "why": list(self.evidence_words),
        }


def _percent(value: Fraction) -> str:
    return f"{float(value) * 100:.1f}%"


def advise(advice: Advice, *, thresholds: Thresholds) -> Advice:
    """Fill in the recommendation, target mode and evidence words of one class."""
    figures, words = advice.figures, []
    if advice.mode in RUNNING:
        reject, undo = figures.share("reject"), figures.undo_share
        reject_held = reject is not None and reject >= thresholds.demote_reject_rate
        undo_held = undo is not None and undo >= thresholds.demote_undo_rate
        limit = _percent(thresholds.demote_reject_rate)
        if reject is None:
            words.append("no decisions by a person to compute a reject rate")
        else:
            sign = "≥" if reject_held else "<"
            words.append(
                f"reject rate {_percent(reject)} ({figures.outcomes['reject']} of "
                f"{figures.volume}) {sign} {limit}"
            )
        limit = _percent(thresholds.demote_undo_rate)
        if undo is None:
            words.append("no reviewed autonomous actions to compute an undo share")
        else:
            sign = "≥" if undo_held else "<"
            words.append(
                f"undo share {_percent(undo)} ({figures.undone} of {figures.reviewed} "
                f"reviewed) {sign} {limit}"
            )
        if reject_held or undo_held:
            advice.recommendation, advice.target_mode = DEMOTE, Mode.ASK
    elif advice.mode in ASKING:
        approve = figures.share("approve")
        rate_held = approve is not None and approve >= thresholds.promote_approve_rate
        volume_held = figures.volume >= thresholds.promote_min_volume
        limit = _percent(thresholds.promote_approve_rate)
        if approve is None:
            words.append("no decisions by a person to compute an approve rate")
        else:
            sign = "≥" if rate_held else "<"
            words.append(
                f"approve rate {_percent(approve)} ({figures.outcomes['approve']} of "
                f"{figures.volume}) {sign} {limit}"
            )
        sign = "≥" if volume_held else "<"
        words.append(
            f"volume {figures.volume} {sign} {thresholds.promote_min_volume} decisions by a person"
        )
        severe = figures.severe
        words.append(
            "no severe (unsafe) rejection"
            if not severe
            else f"{severe} severe (unsafe) rejection{'s' if severe != 1 else ''}"
        )
        if rate_held and volume_held and not severe:
            advice.recommendation, advice.target_mode = PROMOTE, Mode.SAMPLED
    advice.evidence_words = words
    return advice


@dataclass
class AdviceReport:
    days: int
    since: dt.datetime
    now: dt.datetime
    thresholds: Thresholds
    tools: list[Advice]
    tiers: list[Advice]

    @property
    def window(self) -> dict[str, Any]:
        return {"days": self.days, "since": self.since.isoformat(), "until": self.now.isoformat()}

    def find(self, *, scope: str, key: str) -> Advice | None:
        rows = self.tools if scope == "tool" else self.tiers
        return next((advice for advice in rows if advice.key == key), None)
