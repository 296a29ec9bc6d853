"""Applying the advice (docs/autonomy.md): set a class's autonomy rule to what the advice says,
recomputed on the server at that moment, with its figures as the rule's evidence. Audited as
"autonomy.changed" and a new policy version, in one transaction."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import transaction
from django.db.models import F

from approvals.advice import SCOPES
from approvals.advice_selectors import AdviceWindowInvalid, advice_days, autonomy_advice_for
from approvals.autonomy import registered_tools, tier_tools, tool_has_compensation
from approvals.autonomy_models import AutonomyRule
from approvals.models import ApprovalRequest, PolicyVersion, RiskTier, ToolPolicy
from audit.services import event_record
from core.errors import ApplicationError

Mode = AutonomyRule.Mode
APPLY_PERMISSION = "approvals.change_autonomyrule"


class AutonomyError(ApplicationError):
    """A change of autonomy that was not made (400 unless a subclass says otherwise)."""


class AutonomyForbidden(AutonomyError):
    status_code = 403


class AutonomyConflict(AutonomyError):
    """The advice no longer says so, or the tool has no compensation (409)."""

    status_code = 409


def rule_snapshot(rule: AutonomyRule | None) -> dict[str, Any] | None:
    if rule is None:
        return None
    return {
        "tool": rule.tool,
        "tier": rule.tier.name if rule.tier_id else None,
        "mode": rule.mode,
        "sample_percent": rule.sample_percent,
        "confidence_below": None if rule.confidence_below is None else str(rule.confidence_below),
    }


def _scope_parse(scope: str) -> tuple[str, str]:
    kind, _, key = (scope or "").partition(":")
    if kind not in SCOPES or not key or len(key) > 100 or "\x00" in key:
        raise AutonomyError(
            "Name the class as tool:<name> or tier:<name>.", errors={"scope": "tool:… or tier:…"}
        )
    if kind == "tier" and not RiskTier.objects.filter(name=key).exists():
        raise AutonomyError(f"No tier named {key!r}.", errors={"scope": "unknown tier"})
    if kind == "tool" and key not in registered_tools():
        raise AutonomyError(f"No registered tool named {key!r}.", errors={"scope": "unknown tool"})
    return kind, key


def _settings_parse(
    sample_percent: Any, confidence_below: Any
) -> tuple[int | None, Decimal | None, bool]:
    """(sample %, confidence threshold, whether a threshold was given) from the form."""
    percent = None
    if sample_percent not in (None, ""):
        try:
            percent = int(str(sample_percent))
        except ValueError:
            percent = -1
        if not 1 <= percent <= 100:
            raise AutonomyError(
                "The sample share is a whole percent, 1 to 100 (0 would never be reviewed).",
                errors={"sample_percent": "1..100"},
            )
    threshold, given = None, confidence_below not in (None, "")
    if given:
        try:
            threshold = Decimal(str(confidence_below)).quantize(Decimal("0.001"))
        except (InvalidOperation, ValueError):
            threshold = Decimal(-1)
        if not (threshold.is_finite() and 0 <= threshold <= 1):
            raise AutonomyError(
                "The confidence threshold is a number from 0 to 1.",
                errors={"confidence_below": "0..1"},
            )
    return percent, threshold, given


def _compensation_check(*, kind: str, key: str) -> None:
    """Nothing may run without waiting unless it can be undone: every tool of the class must
    have a compensating tool (True from the registry; unknown refuses too)."""
    if kind == "tool":
        tools = [key]
    else:
        # Every registered tool that can fall in the tier (by policy, argument rule or code
        # default: the admin's rule), and any tool seen in it.
        tier = RiskTier.objects.filter(name=key).first()
        tools = sorted(
            set(tier_tools(tier) if tier else [])
            | set(ToolPolicy.objects.filter(tier__name=key).values_list("tool", flat=True))
            | set(
                ApprovalRequest.objects.filter(tier=key)
                .order_by()
                .values_list("tool", flat=True)
                .distinct()[:200]
            )
        )
    missing = [tool for tool in tools if tool_has_compensation(tool) is not True]
    if missing:
        raise AutonomyConflict(
            f"Not promoted: {', '.join(missing)} has no compensating tool, so what ran without "
            "waiting could not be undone.",
            errors={"scope": "no compensation"},
        )


def _policy_version_bump() -> int:
    PolicyVersion.objects.filter(pk=1).update(number=F("number") + 1)
    return PolicyVersion.objects.get(pk=1).number


def autonomy_advice_apply(
    *,
    user: Any,
    scope: str,
    target_mode: str,
    request: Any = None,
    days: Any = None,
    sample_percent: Any = None,
    confidence_below: Any = None,
) -> AutonomyRule:
    """Set the rule of ``scope`` ("tool:<name>" or "tier:<name>") to ``target_mode``, when the
    advice recomputed now says so: promote (-> sampled), demote (-> ask), or start shadow
    (-> shadow, for a class that asks). Stale advice: AutonomyConflict (409). Promotion needs
    compensation for every tool of the class. The rule's evidence is the advice's figures."""
    if not (user.is_authenticated and user.is_active and user.has_perm(APPLY_PERMISSION)):
        raise AutonomyForbidden("Only admins allowed to change autonomy rules may apply advice.")
    kind, key = _scope_parse(scope)
    if target_mode not in Mode.values:
        raise AutonomyError(
            f"Unknown mode {target_mode!r}.", errors={"target_mode": ", ".join(Mode.values)}
        )
    try:
        days = advice_days(days)
    except AdviceWindowInvalid as exc:
        raise AutonomyError(str(exc), errors={"days": "1..365"}) from None
    percent, threshold, threshold_given = _settings_parse(sample_percent, confidence_below)
    with transaction.atomic():
        # The policy version's row first: applies (and policy changes) take turns, so two
        # applies of one class never both create its rule, and each reads the other's result.
        PolicyVersion.objects.get_or_create(pk=1)
        PolicyVersion.objects.select_for_update().get(pk=1)
        lookup = {"tool": key} if kind == "tool" else {"tool": "", "tier__name": key}
        rule = (
            AutonomyRule.objects.select_for_update(of=("self",))
            .select_related("tier")
            .filter(**lookup)
            .order_by("pk")
            .first()
        )
        advice, report = autonomy_advice_for(scope=kind, key=key, days=days)
        shadow_start = target_mode == Mode.SHADOW and advice.may_start_shadow
        if target_mode != advice.target_mode and not shadow_start:
            says = advice.recommendation
            if advice.target_mode:
                says += f" ({advice.target_mode})"
            raise AutonomyConflict(
                f"The advice for {advice.ref} no longer says {target_mode}: it now says {says}. "
                "Reload the advice.",
                errors={"target_mode": f"the advice says {says}"},
            )
        if target_mode in (Mode.SAMPLED, Mode.POST_HOC):
            _compensation_check(kind=kind, key=key)
        before = rule_snapshot(rule)
        if rule is None:
            tier = RiskTier.objects.get(name=key) if kind == "tier" else None
            rule = AutonomyRule(tool=key if kind == "tool" else "", tier=tier)
        rule.mode = target_mode
        if percent is not None:
            rule.sample_percent = percent
        if threshold_given:
            rule.confidence_below = threshold
        evidence = advice.evidence(thresholds=report.thresholds, window=report.window)
        rule.evidence = evidence
        rule.note = f"{advice.recommendation if not shadow_start else 'shadow'}: applied by {user.get_username()}"[
            :200
        ]
        rule.save()
        number = _policy_version_bump()
        event_record(
            action="autonomy.changed",
            actor=user,
            tool=key if kind == "tool" else "",
            data={
                "scope": advice.ref,
                "before": before,
                "after": rule_snapshot(rule),
                "evidence": evidence,
                "policy_version": number,
            },
            request=request,
        )
    return rule
