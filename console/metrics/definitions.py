"""Metrics definitions: constants, result types, who may view them, the fatigue thresholds.

The bottom of the package: it imports none of its modules. The definitions, shared by the page,
the API and the CSV export:

- The window's requests are the approvals created in ``[now - window, now]``.
- Outcomes: a person's decision counts as approve, edit, reject or respond; an approval closed
  without a person (expiry by ``system:timeout``, even when the tier's default is approve, or
  a cancelled run) counts as expired. Rates are shares of the closed requests, so they add up
  to 1; requests still pending have no outcome yet.
- Time to decision is ``decided_at - created_at`` of decisions made by a person. Percentiles
  use the nearest-rank method: the p-th percentile of n sorted values is the value at rank
  ``ceil(p * n / 100)``. That is Postgres' ``percentile_disc``; on SQLite the same rank is
  picked with ``ROW_NUMBER()`` and ``COUNT(*)`` window functions.
- The reviewer of an approval is its final decider (``decided_by``: for a quorum, the person
  whose vote completed it). Approvals without one are grouped under their system label
  (``system:timeout``, ``system:cancel``) or, while pending, under "(undecided)".
- Queue depth and queue age are about now, whatever the window: every pending approval.
- Fatigue: a reviewer or tool whose approve rate is above METRICS_FATIGUE_APPROVAL_RATE and
  whose median time to decision is under METRICS_FATIGUE_MEDIAN_SECONDS.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models import Q

from approvals.models import ApprovalRequest

MANAGERS_GROUP = "managers"
GROUPS: tuple[str, ...] = ("tier", "tool", "agent", "reviewer")
GROUP_DEFAULT = "tier"
WINDOW_DEFAULT = 30
WINDOW_MIN = 1
WINDOW_MAX = 365
PERCENTILES: tuple[int, ...] = (50, 90, 95)
OUTCOMES: tuple[str, ...] = ("approve", "edit", "reject", "respond", "expired")
UNDECIDED = "(undecided)"

# Upper bounds (exclusive) of the histogram buckets; the last bucket is open-ended.
TIME_BUCKETS: tuple[tuple[str, dt.timedelta | None], ...] = (
    ("<10s", dt.timedelta(seconds=10)),
    ("10-30s", dt.timedelta(seconds=30)),
    ("30s-1m", dt.timedelta(minutes=1)),
    ("1-5m", dt.timedelta(minutes=5)),
    ("5-15m", dt.timedelta(minutes=15)),
    ("15m-1h", dt.timedelta(hours=1)),
    ("1-4h", dt.timedelta(hours=4)),
    ("4-24h", dt.timedelta(hours=24)),
    ("≥24h", None),
)
QUEUE_AGE_BUCKETS: tuple[tuple[str, dt.timedelta | None], ...] = (
    ("< 5 min", dt.timedelta(minutes=5)),
    ("5-30 min", dt.timedelta(minutes=30)),
    ("30 min-2 h", dt.timedelta(hours=2)),
    ("2-8 h", dt.timedelta(hours=8)),
    ("8-24 h", dt.timedelta(hours=24)),
    ("≥ 24 h", None),
)

Status = ApprovalRequest.Status
PERSON = Q(decided_by__isnull=False)
CLOSED = ~Q(status=Status.PENDING)
OUTCOME_FILTERS: dict[str, Q] = {
    "approve": Q(status=Status.APPROVED) & PERSON,
    "edit": Q(status=Status.EDITED) & PERSON,
    "reject": Q(status=Status.REJECTED) & PERSON,
    "respond": Q(status=Status.RESPONDED) & PERSON,
    "expired": CLOSED & Q(decided_by__isnull=True),
}


def user_may_view_metrics(user: Any) -> bool:
    """Superusers and members of the "managers" group."""
    if not (user.is_authenticated and user.is_active):
        return False
    return user.is_superuser or user.groups.filter(name=MANAGERS_GROUP).exists()


def fatigue_thresholds() -> tuple[float, float]:
    """(approve rate above which, median seconds under which) a reviewer or tool is flagged."""
    return (
        float(settings.METRICS_FATIGUE_APPROVAL_RATE),
        float(settings.METRICS_FATIGUE_MEDIAN_SECONDS),
    )


# --- result types ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bucket:
    label: str
    count: int


@dataclass(frozen=True)
class DayCounts:
    date: dt.date
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass
class MetricsRow:
    """One group's numbers (or the whole window's, with key "")."""

    key: str
    requests: int = 0
    pending: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    percentiles: dict[int, float | None] = field(default_factory=lambda: dict.fromkeys(PERCENTILES))
    escalated: int = 0
    reminded: int = 0
    queue_depth: int = 0
    oldest_pending_at: dt.datetime | None = None
    oldest_pending_age_seconds: float | None = None
    fatigue: bool = False
    # Reviewer rows: canaries decided in the window (approvals/canary_selectors.py CatchRate).
    canaries: Any = None

    @property
    def label(self) -> str:
        return self.key or UNDECIDED

    @property
    def closed(self) -> int:
        return sum(self.outcomes.values())

    @property
    def person_decisions(self) -> int:
        return self.closed - self.outcomes["expired"]

    @property
    def rates(self) -> dict[str, float | None]:
        closed = self.closed
        return {name: (count / closed if closed else None) for name, count in self.outcomes.items()}

    @property
    def median_seconds(self) -> float | None:
        return self.percentiles[50]


@dataclass(frozen=True)
class FatigueFlag:
    dimension: str  # "reviewer" or "tool"
    key: str
    approve_rate: float
    median_seconds: float
    decisions: int
    reason: str = "approves almost everything, fast"
    catch_rate: float | None = None  # a reviewer's canary catch rate in the window


@dataclass
class MetricsReport:
    window_days: int
    group: str
    since: dt.datetime
    now: dt.datetime
    fatigue_approval_rate: float
    fatigue_median_seconds: float
    total: MetricsRow
    rows: list[MetricsRow]
    fatigue: list[FatigueFlag]
    decisions_per_day: list[DayCounts]
    time_to_decision: list[Bucket]
    queue_age: list[Bucket]
    runs_by_status: dict[str, int]
    # True: computed from the window's rows (rolling window, exact percentiles); False: from
    # the rollups (whole UTC days, percentiles within 1%; see console/metrics/rollup.py).
    exact: bool = True
