"""The advice's figures (approvals/advice.py), read over a window of whole UTC days.

Counts and time to decision come from the metrics rollups (approvals/rollups.py: dimensions
"tool" and "tier", by the approval's creation day), so the read costs the same however many
approvals the window holds: at most 2 * LEVELS blocks per cell. Rejection reasons, reviews after
the fact and shadow verdicts are bounded aggregate queries over the same window (one each).
"""

from __future__ import annotations

import datetime as dt
from functools import reduce
from operator import or_
from typing import Any

from django.conf import settings
from django.db.models import Count, Exists, OuterRef, Q, Sum
from django.utils import timezone

from approvals.advice import (
    OUTCOMES,
    REASONS,
    REVIEWED,
    SCOPES,
    Advice,
    AdviceReport,
    Figures,
    Thresholds,
    advise,
)
from approvals.autonomy_models import AutonomousAction, AutonomyRule, ShadowVerdict
from approvals.models import ApprovalRequest, Canary, RiskTier, ToolPolicy
from approvals.rollup_models import MetricsCount, MetricsHistogram
from approvals.rollups import blocks_cover, bucket_value, day_date, day_of

DAYS_MIN, DAYS_MAX = 1, 365


class AdviceWindowInvalid(ValueError):
    pass


def advice_days(raw: Any) -> int:
    """The window in days from ``?days=`` (empty: AUTONOMY_ADVICE_WINDOW_DAYS)."""
    if raw in (None, ""):
        return int(settings.AUTONOMY_ADVICE_WINDOW_DAYS)
    try:
        days = int(str(raw).strip())
    except ValueError:
        raise AdviceWindowInvalid(f"days must be a whole number, got {raw!r}") from None
    if not DAYS_MIN <= days <= DAYS_MAX:
        raise AdviceWindowInvalid(f"days must be in {DAYS_MIN}..{DAYS_MAX}, got {days}")
    return days


def _median(counts: dict[str, int]) -> float | None:
    """The nearest-rank median of a log histogram {"<bucket>": n} (within 1%)."""
    ordered = sorted((int(bucket), n) for bucket, n in counts.items() if n)
    total = sum(n for _, n in ordered)
    if not total:
        return None
    rank, seen = (total + 1) // 2, 0
    for bucket, n in ordered:
        seen += n
        if seen >= rank:
            return bucket_value(bucket)
    return None  # pragma: no cover - the ranks always end inside the histogram


def _rollup_figures(*, first: int, last: int, figures: dict[tuple[str, str], Figures]) -> None:
    blocks = reduce(or_, (Q(level=lv, block=b) for lv, b in blocks_cover(first, last)))
    counts = (
        MetricsCount.objects.filter(blocks, dimension__in=SCOPES, outcome__in=OUTCOMES)
        .values_list("dimension", "group_key", "outcome")
        .annotate(total=Sum("n"))
        .order_by()
    )
    for scope, key, outcome, total in counts:
        if total:
            figures.setdefault((scope, key), Figures()).outcomes[outcome] += total
    merged: dict[tuple[str, str], dict[str, int]] = {}
    rows = MetricsHistogram.objects.filter(blocks, dimension__in=SCOPES).values_list(
        "dimension", "group_key", "counts"
    )
    for scope, key, histogram in rows:
        cell = merged.setdefault((scope, key), {})
        for bucket, n in (histogram or {}).items():
            cell[bucket] = cell.get(bucket, 0) + int(n)
    for cell_key, histogram in merged.items():
        if cell_key in figures:
            figures[cell_key].median_seconds = _median(histogram)


def _direct_figures(*, since: dt.datetime, figures: dict[tuple[str, str], Figures]) -> None:
    reasons = (
        ApprovalRequest.objects.filter(
            created_at__gte=since,
            status=ApprovalRequest.Status.REJECTED,
            reject_reason__in=REASONS,
            decided_by__isnull=False,
        )
        .filter(~Exists(Canary.objects.filter(approval_id=OuterRef("pk"))))  # tests, not data
        .values_list("tool", "tier", "reject_reason")
        .annotate(n=Count("id"))
        .order_by()
    )
    for tool, tier, reason, n in reasons:
        for cell in (("tool", tool), ("tier", tier)):
            figures.setdefault(cell, Figures()).reasons[reason] += n
    reviews = (
        AutonomousAction.objects.filter(created_at__gte=since, review__in=REVIEWED)
        .values_list("tool", "tier", "review")
        .annotate(n=Count("id"))
        .order_by()
    )
    for tool, tier, review, n in reviews:
        for cell in (("tool", tool), ("tier", tier)):
            figures.setdefault(cell, Figures()).reviews[review] += n
    shadows = (
        ShadowVerdict.objects.filter(created_at__gte=since, agreed__isnull=False)
        .filter(~Exists(Canary.objects.filter(approval_id=OuterRef("approval_id"))))
        .values_list("tool", "tier", "agreed")
        .annotate(n=Count("id"))
        .order_by()
    )
    for tool, tier, agreed, n in shadows:
        for cell in (("tool", tool), ("tier", tier)):
            target = figures.setdefault(cell, Figures())
            target.shadow_decided += n
            target.shadow_agreed += n if agreed else 0


def _tool_tiers(tools: set[str]) -> dict[str, str]:
    """Each tool's tier: its policy's base tier, else the tier of its latest approval."""
    found = dict(
        ToolPolicy.objects.filter(tool__in=tools).values_list("tool", "tier__name").order_by()
    )
    for tool in sorted(tools - set(found)):
        latest = (
            ApprovalRequest.objects.filter(tool=tool)
            .order_by("-created_at")
            .values_list("tier", flat=True)
            .first()
        )
        found[tool] = latest or ""
    return found


def _rules() -> dict[tuple[str, str], AutonomyRule]:
    return {
        ("tool", r.tool) if r.tool else ("tier", r.tier.name): r
        for r in AutonomyRule.objects.select_related("tier")
    }


def _advice_of(
    *,
    scope: str,
    key: str,
    rules: dict[tuple[str, str], AutonomyRule],
    tiers_of: dict[str, str],
    figures: dict[tuple[str, str], Figures],
) -> Advice:
    """A class's advice before ``advise``: its mode is its own rule's, else (a tool) its
    tier's rule's, else ask."""
    tier = tiers_of.get(key, "") if scope == "tool" else key
    rule, mode_from = rules.get((scope, key)), scope
    if rule is None and scope == "tool":
        rule, mode_from = rules.get(("tier", tier)), "tier"
    return Advice(
        scope=scope,
        key=key,
        mode=rule.mode if rule else AutonomyRule.Mode.ASK,
        mode_from=mode_from if rule else "",
        figures=figures.get((scope, key)) or Figures(),
        tier=tier,
    )


def autonomy_advice_report(
    *, days: int | None = None, now: dt.datetime | None = None
) -> AdviceReport:
    """The advice for every tool and tier seen in the window or governed by a rule; most
    decisions first. The window is the last ``days`` whole UTC days, today included."""
    days = advice_days(days)
    now = now or timezone.now()
    last = day_of(now)
    first = last - days + 1
    since = dt.datetime.combine(day_date(first), dt.time(), tzinfo=dt.UTC)
    figures: dict[tuple[str, str], Figures] = {}
    _rollup_figures(first=first, last=last, figures=figures)
    _direct_figures(since=since, figures=figures)
    rules = _rules()
    cells = (
        set(figures)
        | set(rules)
        | {("tier", n) for n in RiskTier.objects.values_list("name", flat=True)}
    )
    tools = {key for scope, key in cells if scope == "tool"}
    tiers_of = _tool_tiers(tools)
    thresholds = Thresholds.from_settings()
    found: dict[str, list[Advice]] = {"tool": [], "tier": []}
    for scope, key in cells:
        advice = _advice_of(scope=scope, key=key, rules=rules, tiers_of=tiers_of, figures=figures)
        found[scope].append(advise(advice, thresholds=thresholds))
    for rows in found.values():
        rows.sort(key=lambda a: (-a.figures.closed, a.key))
    return AdviceReport(
        days=days,
        since=since,
        now=now,
        thresholds=thresholds,
        tools=found["tool"],
        tiers=found["tier"],
    )


def autonomy_advice_for(
    *, scope: str, key: str, days: int | None = None
) -> tuple[Advice, AdviceReport]:
    """One class's advice, recomputed now (a class without figures: its rule's mode, keep)."""
    report = autonomy_advice_report(days=days)
    advice = report.find(scope=scope, key=key)
    if advice is None:
        tiers_of = _tool_tiers({key}) if scope == "tool" else {}
        advice = _advice_of(scope=scope, key=key, rules=_rules(), tiers_of=tiers_of, figures={})
        advise(advice, thresholds=report.thresholds)
    return advice, report
