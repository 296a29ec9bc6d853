"""Batches: related pending approvals one reader may decide together (docs/autonomy.md).

A batch is every pending, unexpired approval with the same (run's agent, tool, tier) that the
reader may decide, when there are at least two. Its key is "<agent>/<tool>/<tier>". The items
come from the queue's selector (``approval_list_pending(mine=True)``), so who may decide what is
written once (approvals/permissions.py): never the run's requester, never an approval already
voted on in its current round, only the tiers the reader decides. A batch never crosses tiers.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Min, QuerySet

from approvals.diff import args_diff
from approvals.models import ApprovalRequest
from approvals.selectors import approval_list_pending
from core.sealing import is_erased

BATCH_MIN = 2
BATCH_ITEMS_MAX = 100  # one page, one decision: more waits for the next batch
BATCH_PROBE = 500  # how many decidable approvals the queue reads to offer "Decide together"


@dataclass(frozen=True)
class BatchKey:
    """What the items of one batch share."""

    agent: str
    tool: str
    tier: str

    @property
    def key(self) -> str:
        return f"{self.agent}/{self.tool}/{self.tier}"


@dataclass(frozen=True)
class BatchSummary:
    """One batch in a list: its key, how many items, since when the oldest waits."""

    batch: BatchKey
    count: int
    oldest: dt.datetime


@dataclass
class BatchItem:
    """One approval of a batch, with what its args change against the batch's first item."""

    approval: ApprovalRequest
    diff: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def rationale(self) -> str:
        payload = self.approval.payload
        value = payload.get("rationale", "") if isinstance(payload, dict) else ""
        return value if isinstance(value, str) else ""


@dataclass
class Batch:
    batch: BatchKey
    items: list[BatchItem]
    total: int  # the batch's size; ``items`` holds at most BATCH_ITEMS_MAX of them

    @property
    def first(self) -> BatchItem | None:
        return self.items[0] if self.items else None


def _decidable(*, user: Any) -> QuerySet[ApprovalRequest]:
    # An erased run's approvals can no longer be decided (approval_decide says 409): not offered.
    return approval_list_pending(user=user, mine=True).filter(run__erased_at__isnull=True)


def batch_list(*, user: Any) -> list[BatchSummary]:
    """The batches ``user`` may decide, the one whose oldest item waits longest first."""
    rows = (
        _decidable(user=user)
        .order_by()
        .values("run__agent", "tool", "tier")
        .annotate(count=Count("id"), oldest=Min("created_at"))
        .filter(count__gte=BATCH_MIN)
        .order_by("oldest", "run__agent", "tool", "tier")
    )
    return [
        BatchSummary(
            batch=BatchKey(agent=row["run__agent"], tool=row["tool"], tier=row["tier"]),
            count=row["count"],
            oldest=row["oldest"],
        )
        for row in rows
        # A key is three path segments of its page's URL: a name with "/" cannot be one (agents,
        # tools and tiers are identifiers or slugs; such a group stays in the queue).
        if "/" not in f"{row['run__agent']}{row['tool']}{row['tier']}"
    ]


def batch_offered(*, user: Any, probe: int = BATCH_PROBE) -> bool:
    """Whether ``user`` has a batch, by a bounded read: two of the first ``probe`` approvals
    they may decide share a key. The queue asks on every load, so it neither counts nor groups
    every pending approval (a batch beyond the probe shows on /batches/ all the same)."""
    # The queue's own order (its index): the probe reads what the queue's first pages show.
    keys = _decidable(user=user).values_list("run__agent", "tool", "tier")[:probe]
    seen: set[tuple[str, str, str]] = set()
    for key in keys:
        if key in seen:
            return True
        seen.add(key)
    return False


def batch_get(*, user: Any, agent: str, tool: str, tier: str) -> Batch:
    """The items of one batch ``user`` may decide, oldest first (at most BATCH_ITEMS_MAX), each
    with its diff against the first. Fewer than two items is still an answer (the rest were
    decided meanwhile): the page says so."""
    qs = _decidable(user=user).filter(run__agent=agent, tool=tool, tier=tier)
    approvals = list(qs.order_by("created_at", "id")[:BATCH_ITEMS_MAX])
    total = len(approvals)
    if total == BATCH_ITEMS_MAX:
        total = qs.order_by().count()
    items = [BatchItem(approval=approval) for approval in approvals]
    if items:
        first = _args(items[0].approval)
        for item in items[1:]:
            item.diff = args_diff(first, _args(item.approval))
    return Batch(batch=BatchKey(agent=agent, tool=tool, tier=tier), items=items, total=total)


def _args(approval: ApprovalRequest) -> dict[str, Any]:
    args = approval.args
    return args if isinstance(args, dict) and not is_erased(args) else {}
