"""Graduated autonomy, the lookup (docs/autonomy.md): which rule governs a call, and whether a
call runs without waiting, is sampled for review after the fact, or waits for a person.

Pure reads: the gate (agents.hitl) asks ``autonomy_verdict`` and records what it was told.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal, InvalidOperation
from typing import Any

from django.db.models import Q

from approvals.autonomy_models import AutonomyRule
from approvals.policy_models import RiskTier, ToolPolicy

DRAW_SCALE = 10_000  # a draw is 0..9999: sampled when below sample_percent * 100

# Whether a tool has a compensating tool (the tool registry is agents'; AgentsConfig.ready()
# registers the provider). Without one, nothing may run without waiting.
_compensation_provider: Callable[[str], bool] | None = None


def compensation_provider_set(provider: Callable[[str], bool] | None) -> None:
    global _compensation_provider
    _compensation_provider = provider


def tool_has_compensation(tool: str) -> bool | None:
    """True/False from the tool registry; None when no registry answered (unknown)."""
    return None if _compensation_provider is None else _compensation_provider(tool)


# The registered tools and their code default tier (agents' registry, through the provider
# AgentsConfig.ready() registers): the admin names every tool a tier rule would govern.
_tools_provider: Callable[[], dict[str, str]] | None = None


def tools_provider_set(provider: Callable[[], dict[str, str]] | None) -> None:
    global _tools_provider
    _tools_provider = provider


def registered_tools() -> dict[str, str]:
    """{tool name: its code default tier}; empty when no registry answered."""
    return {} if _tools_provider is None else dict(_tools_provider())


def sample_draw(key: str) -> int:
    """The action's draw, from its idempotency key alone (reproducible in an audit)."""
    digest = hashlib.sha256(f"autonomy-sample:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % DRAW_SCALE


def is_sampled(*, key: str, percent: int) -> bool:
    return sample_draw(key) < max(0, min(100, percent)) * (DRAW_SCALE // 100)


def autonomy_rule_for(*, tool: str, tier: str, raised: bool = False) -> AutonomyRule | None:
    """The tool's rule, else the tier's rule, else None (ask). One query (the gate asks it
    before every call that waits for a person).

    ``raised``: an argument rule put this call above its tool's base tier (a refund over the
    critical threshold): the tool's rule was earned on its usual calls, so only the tier's rule
    of the raised tier governs it."""
    tier_rule = Q(tool="", tier__name=tier)
    rules = list(
        AutonomyRule.objects.filter(
            Q(tool=tool) | tier_rule if tool and not raised else tier_rule
        ).select_related("tier")
    )
    return next((r for r in rules if r.tool), None) or next(iter(rules), None)


def confidence_value(raw: Any) -> Decimal | None:
    """The agent's stated confidence as a number in [0, 1], else None (not stated/unreadable)."""
    if raw is None or isinstance(raw, bool):
        return None
    try:
        value = Decimal(str(raw))
    except (InvalidOperation, ValueError):
        return None
    if not value.is_finite() or value < 0 or value > 1:
        return None
    # Rounded down: a stated 0.7995 is below a 0.8 threshold, and so is what is stored and
    # shown (thresholds have three decimals, so the comparison is the same either way).
    return value.quantize(Decimal("0.001"), rounding=ROUND_FLOOR)


@dataclass(frozen=True)
class Verdict:
    """What the rule says of one call: ``run`` (without waiting) or ``ask``; for a run,
    whether it is queued for review after the fact; ``shadow``: what a shadow rule would do."""

    rule: AutonomyRule | None
    mode: str
    run: bool
    sampled: bool
    draw: int
    confidence: Decimal | None
    shadow_would: str = ""  # "run" | "ask" under a shadow rule, else ""


def autonomy_verdict(
    *, tool: str, tier: str, key: str | None, confidence: Any, raised: bool = False
) -> Verdict:
    """Whether this call may run without waiting. Without an idempotency key nothing can be
    undone or sampled reproducibly: it asks. A stated confidence below the rule's threshold
    asks; an unreadable one counts as not stated (a threshold then asks: no confidence, no
    autonomy). ``raised``: see ``autonomy_rule_for``."""
    rule = autonomy_rule_for(tool=tool, tier=tier, raised=raised)
    stated = confidence_value(confidence)
    draw = sample_draw(key) if key else DRAW_SCALE
    mode = rule.mode if rule else AutonomyRule.Mode.ASK
    if rule is None or mode == AutonomyRule.Mode.ASK:
        return Verdict(rule, AutonomyRule.Mode.ASK, False, False, draw, stated)
    low = rule.confidence_below is not None and (stated is None or stated < rule.confidence_below)
    if mode == AutonomyRule.Mode.SHADOW:
        would = "ask" if low else "run"
        return Verdict(rule, mode, False, False, draw, stated, shadow_would=would)
    if low or not key:
        return Verdict(rule, mode, False, False, draw, stated)
    percent = 100 if mode == AutonomyRule.Mode.POST_HOC else rule.sample_percent
    sampled = is_sampled(key=key, percent=percent)
    return Verdict(rule, mode, True, sampled, draw, stated)


def tier_tools(tier: RiskTier) -> list[str]:
    """The registered tools whose calls can fall in ``tier``: by their tool policy (its tier
    or one of its argument rules' tiers), else by their code default tier."""
    policies = {
        p.tool: p for p in ToolPolicy.objects.select_related("tier").prefetch_related("rules__tier")
    }
    found = []
    for tool, default in sorted(registered_tools().items()):
        policy = policies.get(tool)
        if policy is None:
            tiers = {default}
        else:
            tiers = {policy.tier.name, *(rule.tier.name for rule in policy.rules.all())}
        if tier.name in tiers:
            found.append(tool)
    return found


def without_compensation(tools: list[str]) -> list[str]:
    """The tools nobody can undo (no compensating tool, or no registry to say)."""
    return [tool for tool in tools if not tool_has_compensation(tool)]
