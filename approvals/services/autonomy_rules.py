"""Writes to autonomy rules (docs/autonomy.md): every save or delete is audited
("autonomy.changed" with the state before and after, and the evidence it was applied from) and
bumps the policy version like a tier change, so a running advance reads the rule afresh."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F

from approvals.autonomy_models import AutonomyRule
from approvals.models import PolicyVersion
from audit.services import event_record


def autonomy_rule_snapshot(rule: AutonomyRule) -> dict[str, Any]:
    """What the audit keeps of a rule."""
    return {
        "tool": rule.tool,
        "tier": rule.tier.name if rule.tier_id else None,
        "mode": rule.mode,
        "sample_percent": rule.sample_percent,
        "confidence_below": (None if rule.confidence_below is None else str(rule.confidence_below)),
        "note": rule.note,
    }


def _policy_version_bump() -> int:
    PolicyVersion.objects.get_or_create(pk=1)
    PolicyVersion.objects.filter(pk=1).update(number=F("number") + 1)
    return PolicyVersion.objects.get(pk=1).number


def autonomy_rule_change_record(
    *,
    rule: AutonomyRule,
    change: str,
    before: dict[str, Any] | None,
    actor: Any,
    request: Any = None,
) -> int:
    """Audit a saved rule ("created" or "changed"); returns the new policy version."""
    with transaction.atomic():
        number = _policy_version_bump()
        event_record(
            action="autonomy.changed",
            actor=actor,
            tool=rule.tool,
            data={
                "rule_id": rule.pk,
                "change": change,
                "object": str(rule),
                "policy_version": number,
                "before": before,
                "after": autonomy_rule_snapshot(rule),
                "evidence": rule.evidence,
            },
            request=request,
        )
    return number


def autonomy_rule_delete(*, rule: AutonomyRule, actor: Any, request: Any = None) -> int:
    """Delete a rule (its class of calls asks a person again) and audit it."""
    with transaction.atomic():
        before = autonomy_rule_snapshot(rule)
        rule_id, label, evidence = rule.pk, str(rule), rule.evidence
        rule.delete()
        number = _policy_version_bump()
        event_record(
            action="autonomy.changed",
            actor=actor,
            tool=before["tool"],
            data={
                "rule_id": rule_id,
                "change": "deleted",
                "object": label,
                "policy_version": number,
                "before": before,
                "after": None,
                "evidence": evidence,
            },
            request=request,
        )
    return number
