"""Cheap reads for Prometheus (/metrics) and the metrics page's stuck list: counts the
database keeps (rollups), one index read per tier, small tables. Not reader-dependent: the
scrape is an operator's, behind its own token or network rule."""

from __future__ import annotations

import datetime as dt

from django.db.models import Count

from approvals.models import ApprovalRequest, Notification, RiskTier, StuckItem
from approvals.rollup_pending import pending_cells
from approvals.rollup_runs import runs_by_status_days

# Every UTC day a run can have been created on (day numbers since 1970).
_ALL_DAYS = (0, 10**6)


def ops_runs_by_status() -> dict[str, int]:
    """Every run by its status now (the trigger-kept counts: one query)."""
    return runs_by_status_days(first=_ALL_DAYS[0], last=_ALL_DAYS[1])


def ops_pending_by_tier() -> dict[str, int]:
    """Pending approvals per tier now (the trigger-kept cells: one query)."""
    counts: dict[str, int] = {}
    for _day, tier, _tool, _agent, n, _escalated, _reminded in pending_cells():
        counts[tier] = counts.get(tier, 0) + n
    return {tier: n for tier, n in counts.items() if n}


def ops_oldest_pending_by_tier(tiers: list[str]) -> dict[str, dt.datetime]:
    """The creation time of each tier's oldest pending approval (index approval_pending_tier_age:
    one index read per tier). Tiers with none pending are left out."""
    found: dict[str, dt.datetime] = {}
    for tier in sorted(set(tiers)):
        oldest = (
            ApprovalRequest.objects.filter(status=ApprovalRequest.Status.PENDING, tier=tier)
            .order_by("created_at")
            .values_list("created_at", flat=True)
            .first()
        )
        if oldest is not None:
            found[tier] = oldest
    return found


def ops_tier_names() -> list[str]:
    return list(RiskTier.objects.values_list("name", flat=True))


def ops_stuck_open_by_kind() -> dict[str, int]:
    """Open stuck items per kind (every kind, 0 included)."""
    counts = dict.fromkeys(StuckItem.Kind.values, 0)
    rows = StuckItem.objects.filter(cleared_at__isnull=True).values("kind").annotate(n=Count("id"))
    for row in rows:
        counts[row["kind"]] = row["n"]
    return counts


def ops_stuck_open(*, limit: int = 50) -> list[StuckItem]:
    """The open stuck items, newest first (the metrics page)."""
    return list(StuckItem.objects.filter(cleared_at__isnull=True).order_by("-raised_at")[:limit])


def ops_notifications_failed() -> int:
    """Notifications that failed for good (index notification_due: its status prefix)."""
    return Notification.objects.filter(status=Notification.Status.FAILED).count()
