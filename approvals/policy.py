"""Which tier a tool call falls in, and what that tier asks for (invariant 7).

The configuration lives in RiskTier / ToolPolicy rows edited in the admin. Where no row exists,
the code defaults below apply (a tool's own default tier, DEFAULT_TIERS, settings), so an
unconfigured install behaves as before. Nothing is cached: each answer is one or two indexed
queries, read in the caller's transaction.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.db.models import Prefetch, Subquery

from approvals.models import PolicyVersion, RiskTier, ToolPolicy, ToolPolicyRule

DEFAULT_TIERS: dict[str, dict[str, Any]] = {
    "read": {"level": 0, "requires_approval": False},
    "write": {"level": 1, "requires_approval": True},
    "critical": {"level": 2, "requires_approval": True},
}
ALL_DECISIONS = ["approve", "edit", "reject", "respond"]
# An unknown tier name is treated as the riskiest default.
UNKNOWN_TIER = "critical"


_read_once: ContextVar[dict[str, Any] | None] = ContextVar("policy_read_once", default=None)


@contextmanager
def policy_read_once() -> Iterator[None]:
    """Inside, the policy is read at first use and answered from that reading (an advance
    asks the same questions many times: the gate before and after its pause, the ledger at
    execution). Nested uses share the outer reading."""
    if _read_once.get() is not None:
        yield
        return
    token = _read_once.set({"checked_at": time.monotonic()})  # see policy_fresh
    try:
        yield
    finally:
        _read_once.reset(token)


@contextmanager
def policy_fresh() -> Iterator[None]:
    """Inside, the policy is the one in force now, even within ``policy_read_once``, for what
    nothing checks later (an auto-approval, the ledger's check at execution): a reading older
    than FRESH_SECONDS is kept only while the policy version (bumped by every change,
    ``policy_change_record``) is the one checked before it; otherwise it is taken again."""
    memo = _read_once.get()
    if memo is not None and time.monotonic() - memo["checked_at"] > FRESH_SECONDS:
        at = time.monotonic()
        number = _version_read()
        if memo.get("checked_version") != number:
            memo.clear()  # read again from here on, after this version: never older than it
        memo["checked_version"], memo["checked_at"] = number, at
    yield


# How old a reading policy_fresh takes as the policy in force without asking: about the time
# between a check and the call it allows, which no reading closes (a change committed meanwhile
# is concurrent with the call).
FRESH_SECONDS = 1.0


def _version_read() -> int:
    return PolicyVersion.objects.filter(pk=1).values_list("number", flat=True).first() or 0


def _tiers_read() -> dict[str, RiskTier] | None:
    memo = _read_once.get()
    if memo is None:
        return None
    if "tiers" not in memo:
        # The policy version rides on the same statement (one snapshot): what the approval
        # requests record is the version of the tiers they were given.
        version = PolicyVersion.objects.filter(pk=1).values("number")[:1]
        tiers = list(
            RiskTier.objects.select_related("webhook_endpoint").annotate(
                policy_number=Subquery(version)
            )
        )
        memo["tiers"] = {t.name: t for t in tiers}
        if tiers and "version" not in memo:
            memo["version"] = tiers[0].policy_number or 0
    return memo["tiers"]


def _tool_policy(tool: str) -> tuple[ToolPolicy | None, list[ToolPolicyRule]]:
    memo = _read_once.get()
    if memo is None:
        policy = ToolPolicy.objects.select_related("tier").filter(tool=tool).first()
        if policy is None:
            return None, []
        return policy, list(policy.rules.select_related("tier").order_by("position", "id"))
    if "tools" not in memo:
        rules = ToolPolicyRule.objects.select_related("tier").order_by("position", "id")
        memo["tools"] = {
            p.tool: p
            for p in ToolPolicy.objects.select_related("tier").prefetch_related(
                Prefetch("rules", queryset=rules)
            )
        }
    policy = memo["tools"].get(tool)
    return (policy, list(policy.rules.all())) if policy is not None else (None, [])


def tool_policy_get(tool: str) -> tuple[ToolPolicy | None, list[ToolPolicyRule]]:
    """The tool's policy (None: the tool's code default applies) and its rules in order."""
    return _tool_policy(tool)


def tier_get(name: str) -> RiskTier | None:
    """The configured tier of this name, or None (code defaults apply)."""
    tiers = _tiers_read()
    if tiers is not None:
        return tiers.get(name)
    return RiskTier.objects.select_related("webhook_endpoint").filter(name=name).first()


def tier_for_call(*, tool: str, args: dict[str, Any], default_tier: str) -> str:
    """The tier of this exact call: the tool policy's tier, raised or lowered by its first
    matching argument rule; ``default_tier`` (the tool's code default) without a policy."""
    policy, rules = _tool_policy(tool)
    if policy is None:
        return default_tier
    for rule in rules:
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
    memo = _read_once.get()
    if memo is not None and "tiers" not in memo:
        _tiers_read()  # reads the version with the tiers
    if memo is not None and "version" in memo:
        return memo["version"]
    number = _version_read()
    if memo is not None:
        memo["version"] = number
    return number
