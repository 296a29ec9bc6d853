"""Reads for the review-after-the-fact queue (docs/autonomy.md): actions that ran without
waiting for a person, as a reader may see and review them.

Who sees an action: whoever sees its run (permissions.run_visible_filter), and whoever may
review it by its tier (permissions.action_filters): a reviewer sees what they are asked to
review even when its run has no approval of their tier. What the reader may not see raises
``DoesNotExist`` or is left out of a list. A page that reads several lists takes the reader's
``Scope`` once (``reader_scope``), so the tiers are read once per request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet

from approvals.autonomy_models import AutonomousAction
from approvals.permissions import action_filters

Review = AutonomousAction.Review

# The queue page's views of the rows: what each shows.
REVIEW_VIEWS: dict[str, tuple[str, ...]] = {
    "pending": (Review.PENDING,),
    "fine": (Review.FINE,),
    "undone": (Review.UNDOING, Review.UNDONE, Review.UNDO_FAILED),
    "all": (Review.PENDING, Review.FINE, Review.UNDOING, Review.UNDONE, Review.UNDO_FAILED),
}
COUNT_CAP = 99  # figures above it read "99+": counted by reading at most 100 ids, no COUNT(*)


@dataclass(frozen=True)
class Scope:
    """What one reader sees (``visible``) and may review (``reviewable``, None: nothing)."""

    user: Any
    visible: Q
    reviewable: Q | None


def reader_scope(user: Any) -> Scope:
    visible, reviewable = action_filters(user=user)
    return Scope(user=user, visible=visible, reviewable=reviewable)


def _actions() -> QuerySet[AutonomousAction]:
    return AutonomousAction.objects.select_related("run", "run__requested_by", "reviewed_by")


def _filtered(
    qs: QuerySet[AutonomousAction], *, tool: str | None, tier: str | None
) -> QuerySet[AutonomousAction]:
    if tool:
        qs = qs.filter(tool=tool)
    if tier:
        qs = qs.filter(tier=tier)
    return qs


def autonomous_action_queue(
    *, user: Any, tool: str | None = None, tier: str | None = None, scope: Scope | None = None
) -> QuerySet[AutonomousAction]:
    """The actions waiting for ``user``'s review after the fact, oldest first: pending, of a
    tier they may review, of a run they did not request."""
    scope = scope or reader_scope(user)
    if scope.reviewable is None:
        return AutonomousAction.objects.none()
    qs = _actions().filter(scope.reviewable, review=Review.PENDING).exclude(run__requested_by=user)
    return _filtered(qs, tool=tool, tier=tier).order_by("created_at", "id")


def autonomous_action_list(
    *,
    fetched_by: Any,
    review: str | tuple[str, ...] | list[str] | None = None,
    tool: str | None = None,
    tier: str | None = None,
    run_id: Any = None,
    scope: Scope | None = None,
) -> QuerySet[AutonomousAction]:
    """The actions ``fetched_by`` may see, oldest first; ``review`` one state or several."""
    scope = scope or reader_scope(fetched_by)
    qs = _actions().filter(scope.visible)
    if isinstance(review, str):
        qs = qs.filter(review=review)
    elif review:
        qs = qs.filter(review__in=list(review))
    if run_id:
        qs = qs.filter(run_id=run_id)
    return _filtered(qs, tool=tool, tier=tier).order_by("created_at", "id")


def _capped(qs: QuerySet[AutonomousAction]) -> int:
    """How many rows, up to COUNT_CAP + 1 (read in the index's order, like a page)."""
    return len(qs.values_list("pk", flat=True)[: COUNT_CAP + 1])


def count_label(count: int) -> str:
    return f"{COUNT_CAP}+" if count > COUNT_CAP else str(count)


def autonomous_action_count(*, user: Any, scope: Scope | None = None) -> int:
    """How many actions wait for ``user``'s review, up to COUNT_CAP + 1."""
    if not getattr(user, "is_authenticated", False):
        return 0
    return _capped(autonomous_action_queue(user=user, scope=scope))


def autonomous_action_counts(*, user: Any, scope: Scope | None = None) -> dict[str, int]:
    """The queue page's figures, each up to COUNT_CAP + 1: ``pending`` waits for ``user``'s
    review; ``fine``, ``undone`` (undoing, undone or failed) and ``all`` count what they may
    see."""
    scope = scope or reader_scope(user)
    counts = {
        view: _capped(autonomous_action_list(fetched_by=user, review=states, scope=scope))
        for view, states in REVIEW_VIEWS.items()
        if view != "pending"
    }
    return {"pending": autonomous_action_count(user=user, scope=scope), **counts}


def autonomous_action_get(*, pk: int, fetched_by: Any) -> AutonomousAction:
    """The action, if ``fetched_by`` may see it; ``DoesNotExist`` otherwise."""
    return _actions().filter(reader_scope(fetched_by).visible).get(pk=pk)
