"""Reads for the review-after-the-fact queue (docs/autonomy.md): actions that ran without
waiting for a person, as a reader may see and review them.

Who sees an action: whoever sees its run (permissions.run_visible_filter), and whoever may
review it by its tier (permissions.action_reviewable_filter): a reviewer sees what they are asked
to review even when its run has no approval of their tier. What the reader may not see raises
``DoesNotExist`` or is left out of a list.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q, QuerySet

from approvals.autonomy_models import AutonomousAction
from approvals.permissions import action_reviewable_filter, run_visible_filter, user_may_view_all

Review = AutonomousAction.Review

# The queue page's views of the rows: what each shows.
REVIEW_VIEWS: dict[str, tuple[str, ...]] = {
    "pending": (Review.PENDING,),
    "fine": (Review.FINE,),
    "undone": (Review.UNDOING, Review.UNDONE, Review.UNDO_FAILED),
    "all": (Review.PENDING, Review.FINE, Review.UNDOING, Review.UNDONE, Review.UNDO_FAILED),
}


def action_visible_filter(*, user: Any) -> Q:
    """Who sees an action, as a query over AutonomousAction."""
    if not user.is_authenticated:
        return Q(pk__in=[])
    if user_may_view_all(user):
        return Q()  # never OR-ed: Q() | x is x, which would hide what this reader may read
    visible = run_visible_filter(user=user, via="run__")
    reviewable = action_reviewable_filter(user=user)
    return visible if reviewable is None else visible | reviewable


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
    *, user: Any, tool: str | None = None, tier: str | None = None
) -> QuerySet[AutonomousAction]:
    """The actions waiting for ``user``'s review after the fact, oldest first: pending, of a
    tier they may review, of a run they did not request."""
    reviewable = action_reviewable_filter(user=user)
    if reviewable is None:
        return AutonomousAction.objects.none()
    qs = _actions().filter(reviewable, review=Review.PENDING).exclude(run__requested_by=user)
    return _filtered(qs, tool=tool, tier=tier).order_by("created_at", "id")


def autonomous_action_list(
    *,
    fetched_by: Any,
    review: str | tuple[str, ...] | list[str] | None = None,
    tool: str | None = None,
    tier: str | None = None,
    run_id: Any = None,
) -> QuerySet[AutonomousAction]:
    """The actions ``fetched_by`` may see, oldest first; ``review`` one state or several."""
    qs = _actions().filter(action_visible_filter(user=fetched_by))
    if isinstance(review, str):
        qs = qs.filter(review=review)
    elif review:
        qs = qs.filter(review__in=list(review))
    if run_id:
        qs = qs.filter(run_id=run_id)
    return _filtered(qs, tool=tool, tier=tier).order_by("created_at", "id")


def autonomous_action_count(*, user: Any) -> int:
    """How many actions wait for ``user``'s review (the nav's badge): one COUNT, or none for
    someone who may review nothing."""
    if not getattr(user, "is_authenticated", False):
        return 0
    return autonomous_action_queue(user=user).count()


def autonomous_action_counts(*, user: Any) -> dict[str, int]:
    """The queue page's figures: ``pending`` waits for ``user``'s review; ``fine``,
    ``undone`` (undoing, undone or failed) and ``all`` count what they may see."""
    by_state = dict(
        autonomous_action_list(fetched_by=user, review=REVIEW_VIEWS["all"])
        .order_by()
        .values_list("review")
        .annotate(n=Count("id"))
    )
    counts = {
        view: sum(by_state.get(state, 0) for state in states)
        for view, states in REVIEW_VIEWS.items()
    }
    counts["pending"] = autonomous_action_count(user=user)
    return counts


def autonomous_action_get(*, pk: int, fetched_by: Any) -> AutonomousAction:
    """The action, if ``fetched_by`` may see it; ``DoesNotExist`` otherwise."""
    return _actions().filter(action_visible_filter(user=fetched_by)).get(pk=pk)
