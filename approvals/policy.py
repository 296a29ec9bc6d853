"""Which tier a tool call falls in, and what that tier asks for (invariant 7).

The configuration lives in RiskTier / ToolPolicy rows edited in the admin. Where no row exists,
the code defaults below apply (a tool's own default tier, DEFAULT_TIERS, settings), so an
unconfigured install behaves as before. Nothing is cached: each answer is one or two indexed
queries, read in the caller's transaction.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings

from approvals.models import PolicyVersion, RiskTier, ToolPolicy, ToolPolicyRule

DEFAULT_TIERS: dict[str, dict[str, Any]] = {
    "read": {"level": 0, "requires_approval": False},
    "write": {"level": 1, "requires_approval": True},
    "critical": {"level": 2, "requires_approval": True},
}
ALL_DECISIONS = ["approve", "edit", "reject", "respond"]
# An unknown tier name is treated as the riskiest default.
UNKNOWN_TIER = "critical"


def tier_get(name: str) -> RiskTier | None:
    """The configured tier of this name, or None (code defaults apply)."""
    return RiskTier.objects.select_related("webhook_endpoint").filter(name=name).first()


def tier_for_call(*, tool: str, args: dict[str, Any], default_tier: str) -> str:
    """The tier of this exact call: the tool policy's tier, raised or lowered by its first
    matching argument rule; ``default_tier`` (the tool's code default) without a policy."""
    policy = ToolPolicy.objects.select_related("tier").filter(tool=tool).first()
    if policy is None:
        return default_tier
    for rule in policy.rules.select_related("tier").order_by("position", "id"):
        if rule_matches(rule=rule, args=args):
            return rule.tier.name
    return policy.tier.name


def rule_matches(*, rule: ToolPolicyRule, args: dict[str, Any]) -> bool:
    """``args[rule.arg] <op> rule.value``; numbers compare as numbers, else as text."""
    if not isinstance(args, dict) or rule.arg not in args:
        return False
    left_raw = args[rule.arg]
    left_num, right_num = _number(left_raw), _number(rule.value)
    if left_num is not None and right_num is not None:
        left: Any = left_num
        right: Any = right_num
    else:
        left, right = str(left_raw), rule.value
        if rule.op not in (ToolPolicyRule.Op.EQ, ToolPolicyRule.Op.NE):
            return False  # ordering text against a number threshold is never a match
    return {
        ToolPolicyRule.Op.GT: lambda: left > right,
        ToolPolicyRule.Op.GTE: lambda: left >= right,
        ToolPolicyRule.Op.LT: lambda: left < right,
        ToolPolicyRule.Op.LTE: lambda: left <= right,
        ToolPolicyRule.Op.EQ: lambda: left == right,
        ToolPolicyRule.Op.NE: lambda: left != right,
    }[rule.op]()


def _number(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    try:
        number = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() else None


def _default(tier: str) -> dict[str, Any]:
    return DEFAULT_TIERS.get(tier, DEFAULT_TIERS[UNKNOWN_TIER])


def tier_requires_approval(tier: str) -> bool:
    row = tier_get(tier)
    return row.requires_approval if row else _default(tier)["requires_approval"]


def tier_level(tier: str) -> int:
    row = tier_get(tier)
    return row.level if row else _default(tier)["level"]


def tier_ttl_seconds(tier: str) -> int:
    row = tier_get(tier)
    return row.ttl_seconds if row else settings.APPROVAL_TTL_SECONDS


def tier_allowed_decisions(tier: str) -> list[str]:
    row = tier_get(tier)
    if row and row.allowed_decisions:
        return [d for d in ALL_DECISIONS if d in row.allowed_decisions]
    return list(ALL_DECISIONS)


def policy_version_current() -> int:
    return PolicyVersion.objects.filter(pk=1).values_list("number", flat=True).first() or 0
