"""Writes to the approval policy: every change is audited and bumps the policy version."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import F

from approvals.models import PolicyVersion, RiskTier, ToolPolicy, ToolPolicyRule
from audit.services import event_record


def policy_snapshot(obj: RiskTier | ToolPolicy) -> dict[str, Any]:
    """What the audit keeps of a tier or tool policy (after its relations were saved)."""
    if isinstance(obj, RiskTier):
        return {
            "name": obj.name,
            "level": obj.level,
            "requires_approval": obj.requires_approval,
            "approver_groups": sorted(g.name for g in obj.approver_groups.all()),
            "required_group": obj.required_group.name if obj.required_group_id else None,
            "lead_group": obj.lead_group.name if obj.lead_group_id else None,
            "required_approvals": obj.required_approvals,
            "ttl_seconds": obj.ttl_seconds,
            "remind_before_seconds": obj.remind_before_seconds,
            "escalate_after_seconds": obj.escalate_after_seconds,
            "escalation_group": obj.escalation_group.name if obj.escalation_group_id else None,
            "expiry_decision": obj.expiry_decision,
            "stuck_after_seconds": obj.stuck_after_seconds,
            "allowed_decisions": obj.allowed_decisions,
            "email_notifications": obj.email_notifications,
            "webhook_endpoint": obj.webhook_endpoint.name if obj.webhook_endpoint_id else None,
        }
    return {
        "tool": obj.tool,
        "tier": obj.tier.name,
        "rules": [
            {"arg": r.arg, "op": r.op, "value": r.value, "tier": r.tier.name}
            for r in obj.rules.select_related("tier").order_by("position", "id")
        ],
    }


def policy_change_record(
    *,
    obj: RiskTier | ToolPolicy,
    change: str,
    actor: Any,
    snapshot: dict[str, Any] | None = None,
    request: Any = None,
) -> int:
    """Bump the policy version and audit "policy.changed"; returns the new version number.

    ``change`` is created, changed or deleted; pass ``snapshot`` for a deleted object.
    """
    with transaction.atomic():
        PolicyVersion.objects.get_or_create(pk=1)
        PolicyVersion.objects.filter(pk=1).update(number=F("number") + 1)
        number = PolicyVersion.objects.get(pk=1).number
        event_record(
            action="policy.changed",
            actor=actor,
            data={
                "kind": type(obj)._meta.model_name,
                "change": change,
                "object": str(obj),
                "policy_version": number,
                "state": snapshot if snapshot is not None else policy_snapshot(obj),
            },
            request=request,
        )
    return number


def policy_object_delete(*, obj: RiskTier | ToolPolicy, actor: Any, request: Any = None) -> int:
    with transaction.atomic():
        snapshot = policy_snapshot(obj)
        obj.delete()
        return policy_change_record(
            obj=obj, change="deleted", actor=actor, snapshot=snapshot, request=request
        )


# --- demo seed ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoTier:
    name: str
    level: int
    requires_approval: bool
    approver_groups: tuple[str, ...]
    required_approvals: int = 1
    required_group: str | None = None
    ttl_seconds: int = 20 * 60
    remind_before_seconds: int = 5 * 60
    escalate_after_seconds: int = 3 * 60
    escalation_group: str | None = None


@dataclass(frozen=True)
class DemoToolPolicy:
    tool: str
    tier: str
    rules: tuple[tuple[str, str, str, str], ...] = field(default=())


# Short enough to watch an escalation (3 min) and an expiry (15-20 min) during a demo, long
# enough to click through the console first.
DEMO_TIERS: tuple[DemoTier, ...] = (
    DemoTier("read", 0, False, ("approvers-write",), remind_before_seconds=0),
    DemoTier("write", 1, True, ("approvers-write",), escalation_group="approvers-critical"),
    DemoTier(
        "critical",
        2,
        True,
        ("approvers-write", "approvers-critical"),
        required_approvals=2,
        required_group="approvers-critical",
        ttl_seconds=15 * 60,
        escalation_group="incident-commanders",
    ),
)
DEMO_TOOL_POLICIES: tuple[DemoToolPolicy, ...] = (
    DemoToolPolicy("refund_order", "write", rules=(("amount", "gt", "500", "critical"),)),
    DemoToolPolicy("rollback_deploy", "critical"),
    DemoToolPolicy("roll_forward_deploy", "critical"),
)


def policy_seed_demo(*, actor: Any = "system:seed") -> list[str]:
    """Create or reset the demo tiers and tool policies; audits only what changed."""
    changed: list[str] = []
    with transaction.atomic():
        groups: dict[str, Group] = {}

        def group(name: str | None) -> Group | None:
            if name is None:
                return None
            if name not in groups:
                groups[name] = Group.objects.get_or_create(name=name)[0]
            return groups[name]

        tiers: dict[str, RiskTier] = {}
        for spec in DEMO_TIERS:
            tier = RiskTier.objects.filter(name=spec.name).first()
            before = policy_snapshot(tier) if tier else None
            # Levels are unique: move a clashing tier out of the way first.
            RiskTier.objects.filter(level=spec.level).exclude(name=spec.name).update(
                level=1000 + spec.level
            )
            tier, created = RiskTier.objects.update_or_create(
                name=spec.name,
                defaults={
                    "level": spec.level,
                    "requires_approval": spec.requires_approval,
                    "required_approvals": spec.required_approvals,
                    "required_group": group(spec.required_group),
                    "ttl_seconds": spec.ttl_seconds,
                    "remind_before_seconds": spec.remind_before_seconds,
                    "escalate_after_seconds": spec.escalate_after_seconds,
                    "escalation_group": group(spec.escalation_group),
                    "expiry_decision": RiskTier.ExpiryDecision.REJECT,
                },
            )
            tier.approver_groups.set([group(name) for name in spec.approver_groups])
            tiers[spec.name] = tier
            if before != policy_snapshot(tier):
                policy_change_record(
                    obj=tier, change="created" if created else "changed", actor=actor
                )
                changed.append(f"tier {tier.name}")
        for spec in DEMO_TOOL_POLICIES:
            existing = ToolPolicy.objects.filter(tool=spec.tool).first()
            before = policy_snapshot(existing) if existing else None
            tool_policy, created = ToolPolicy.objects.update_or_create(
                tool=spec.tool, defaults={"tier": tiers[spec.tier]}
            )
            tool_policy.rules.all().delete()
            for position, (arg, op, value, tier_name) in enumerate(spec.rules):
                ToolPolicyRule.objects.create(
                    policy=tool_policy,
                    position=position,
                    arg=arg,
                    op=op,
                    value=value,
                    tier=tiers[tier_name],
                )
            if before != policy_snapshot(tool_policy):
                policy_change_record(
                    obj=tool_policy, change="created" if created else "changed", actor=actor
                )
                changed.append(f"tool policy {tool_policy.tool}")
    return changed
