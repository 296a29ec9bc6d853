"""Shadow mode (docs/autonomy.md): record what a shadow rule would have done with each new
approval, and, when a person decides it, whether they agreed.

Agreement, exactly: a "run" agrees with an approve of the unchanged args (status approved); an
"ask" agrees with anything else a person chose (edit, reject, respond). An approval that
expires (or closes without a person) leaves ``agreed`` null: nobody said.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from django.db.models import Case, Q, Value, When

from approvals.autonomy import confidence_value
from approvals.autonomy_models import AutonomyRule, ShadowVerdict
from approvals.models import ApprovalRequest


def rules_for(*, tools: Iterable[str], tiers: Iterable[str]) -> dict[tuple[str, str], AutonomyRule]:
    """The rules of these tools and tiers, one query: {("tool", name) | ("tier", name): rule}."""
    found: dict[tuple[str, str], AutonomyRule] = {}
    rows = AutonomyRule.objects.filter(
        Q(tool__in=set(tools)) | Q(tool="", tier__name__in=set(tiers))
    ).select_related("tier")
    for rule in rows:
        found[("tool", rule.tool) if rule.tool else ("tier", rule.tier.name)] = rule
    return found


def shadow_would(*, rule: AutonomyRule, confidence: object) -> str:
    """What a shadow rule would do with a call of this stated confidence (as autonomy_verdict):
    "ask" when it is below the rule's threshold or not stated under one, else "run"."""
    stated = confidence_value(confidence)
    low = rule.confidence_below is not None and (stated is None or stated < rule.confidence_below)
    return ShadowVerdict.Would.ASK if low else ShadowVerdict.Would.RUN


def shadow_verdicts_record(*, approvals: list[ApprovalRequest]) -> list[ShadowVerdict]:
    """One ShadowVerdict per new approval whose governing rule (the tool's, else the tier's)
    is in shadow mode; the confidence is the payload's "confidence". At most two queries."""
    if not approvals:
        return []
    rules = rules_for(tools=(a.tool for a in approvals), tiers=(a.tier for a in approvals))
    if not any(rule.mode == AutonomyRule.Mode.SHADOW for rule in rules.values()):
        return []
    verdicts = []
    for approval in approvals:
        rule = rules.get(("tool", approval.tool)) or rules.get(("tier", approval.tier))
        if rule is None or rule.mode != AutonomyRule.Mode.SHADOW:
            continue
        payload = approval.payload if isinstance(approval.payload, dict) else {}
        verdicts.append(
            ShadowVerdict(
                approval=approval,
                rule=rule,
                tool=approval.tool,
                tier=approval.tier,
                would=shadow_would(rule=rule, confidence=payload.get("confidence")),
            )
        )
    return ShadowVerdict.objects.bulk_create(verdicts)


def shadow_verdict_settle(*, approval: ApprovalRequest, now: dt.datetime) -> int:
    """Set ``agreed`` on the approval's shadow verdict, if it has one (one UPDATE)."""
    approved = approval.status == ApprovalRequest.Status.APPROVED
    return ShadowVerdict.objects.filter(approval_id=approval.pk, agreed__isnull=True).update(
        agreed=Case(
            When(would=ShadowVerdict.Would.RUN, then=Value(approved)),
            default=Value(not approved),
        ),
        decided_at=now,
    )
