"""Reads of canaries: what a decider is told after deciding one, each reviewer's catch rate,
and compliance's report (docs/autonomy.md)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Max, Q

from approvals.canary_templates import TEMPLATES
from approvals.models import ApprovalRequest, ApprovalVote, Canary, CanaryPlan
from approvals.services.canaries import plan_problem
from audit.selectors import user_sees_all

OUTCOME_LINES = {
    Canary.Outcome.CAUGHT: "You caught it: it was right not to let it run.",
    Canary.Outcome.MISSED: "It would have {would_have} had it been real.",
    Canary.Outcome.EXPIRED: "Nobody decided it in time; it is not counted.",
}


def user_may_read_canaries(user: Any) -> bool:
    """Compliance and superusers (the audit readers)."""
    return bool(user.is_authenticated and user_sees_all(user))


def canary_told_for(*, approval: ApprovalRequest, user: Any) -> dict[str, Any] | None:
    """After the final decision, what its decider (or a voter) is told; before it, None, so
    nothing about a pending approval differs from a real one's."""
    if approval.is_pending or not user.is_authenticated:
        return None
    canary = Canary.objects.filter(approval_id=approval.pk).exclude(outcome="").first()
    if canary is None:
        return None
    decided = canary.decided_by_id == user.pk
    if not decided and not ApprovalVote.objects.filter(approval=approval, user=user).exists():
        return None
    return canary_told_dict(canary, decided=decided)


def canary_told_dict(canary: Canary, *, decided: bool = True) -> dict[str, Any]:
    template = TEMPLATES.get(canary.template)
    line = OUTCOME_LINES.get(canary.outcome, "").format(would_have=canary.would_have or "acted")
    return {
        "canary": canary,
        "decided": decided,
        "template": canary.template,
        "title": template.title if template else canary.template,
        "outcome": canary.outcome,
        "line": line,
    }


@dataclass
class CatchRate:
    reviewer: str
    seen: int
    caught: int
    missed: int
    last_miss: dt.datetime | None

    @property
    def counted(self) -> int:
        return self.caught + self.missed

    @property
    def rate(self) -> float | None:
        return self.caught / self.counted if self.counted else None


def catch_rates(*, since: dt.datetime | None = None, now: dt.datetime | None = None) -> dict:
    """{username: CatchRate} of canaries decided by a person in ``[since, now]``: caught /
    (caught + missed); expired ones are not counted (nobody decided them)."""
    rows = Canary.objects.filter(decided_by__isnull=False)
    if since is not None:
        rows = rows.filter(decided_at__gte=since)
    if now is not None:
        rows = rows.filter(decided_at__lte=now)
    found = (
        rows.values("decided_by__username")
        .annotate(
            seen=Count("id"),
            caught=Count("id", filter=Q(outcome=Canary.Outcome.CAUGHT)),
            missed=Count("id", filter=Q(outcome=Canary.Outcome.MISSED)),
            last_miss=Max("decided_at", filter=Q(outcome=Canary.Outcome.MISSED)),
        )
        .order_by("decided_by__username")
    )
    return {
        row["decided_by__username"]: CatchRate(
            reviewer=row["decided_by__username"],
            seen=row["seen"],
            caught=row["caught"],
            missed=row["missed"],
            last_miss=row["last_miss"],
        )
        for row in found
    }


def canary_report(*, fetched_by: Any, limit: int = 50) -> dict[str, Any]:
    """Compliance's report: per reviewer, the recent canaries, and the plans in force."""
    if not user_may_read_canaries(fetched_by):
        raise PermissionError("Only compliance and admins may read the canary report.")
    recent = list(
        Canary.objects.select_related("approval", "decided_by", "plan__tier").order_by(
            "-planted_at", "-id"
        )[:limit]
    )
    for canary in recent:
        canary.tier = canary.approval.tier
        canary.title = TEMPLATES[canary.template].title if canary.template in TEMPLATES else ""
        canary.seconds = (
            (canary.decided_at - canary.approval.created_at).total_seconds()
            if canary.decided_at
            else None
        )
    return {
        "reviewers": sorted(
            catch_rates().values(), key=lambda r: (r.rate if r.rate is not None else 2, r.reviewer)
        ),
        "recent": recent,
        "plans": _plans_in_force(),
        "open": Canary.objects.filter(outcome="").count(),
    }


def _plans_in_force() -> list[CanaryPlan]:
    """The active plans, each with ``problem``: why it plants nothing now, or ""."""
    plans = list(CanaryPlan.objects.filter(is_active=True).select_related("tier", "requested_as"))
    for plan in plans:
        plan.problem = plan_problem(plan=plan)
    return plans
