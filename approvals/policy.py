"""Which tier a tool call falls in, and whether that tier needs a person.

Issue "Approval policy" replaces the defaults here with RiskTier / ToolPolicy rows edited in
the admin; callers only use these functions.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

DEFAULT_TIERS: dict[str, dict[str, Any]] = {
    "read": {"level": 0, "requires_approval": False},
    "write": {"level": 1, "requires_approval": True},
    "critical": {"level": 2, "requires_approval": True},
}
ALL_DECISIONS = ["approve", "edit", "reject", "respond"]


def tier_for_call(*, tool: str, args: dict[str, Any], default_tier: str) -> str:
    """The tier of this exact call (tool policy rules may raise it by args)."""
    return default_tier


def tier_requires_approval(tier: str) -> bool:
    return DEFAULT_TIERS.get(tier, DEFAULT_TIERS["critical"])["requires_approval"]


def tier_level(tier: str) -> int:
    return DEFAULT_TIERS.get(tier, DEFAULT_TIERS["critical"])["level"]


def tier_ttl_seconds(tier: str) -> int:
    return settings.APPROVAL_TTL_SECONDS


def tier_allowed_decisions(tier: str) -> list[str]:
    return list(ALL_DECISIONS)
