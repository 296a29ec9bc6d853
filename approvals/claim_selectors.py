"""Reads for claims and assignments. An approval's claim is shown to whoever may see the
approval (callers pass approvals read through approvals.selectors, which apply that rule)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet, prefetch_related_objects
from django.utils import timezone

from approvals import policy
from approvals.models import ApprovalClaim, ApprovalRequest
from approvals.permissions import tier_group_ids, user_may_assign, user_may_decide

LIVE_CLAIM = "live_claim"


def claim_prefetch() -> Prefetch:
    """Each approval's live claim as ``approval.live_claim`` (None when free): one query for a
    whole page, however many rows (a lapsed claim reads as free)."""
    live = ApprovalClaim.objects.filter(
        Q(until__isnull=True) | Q(until__gt=timezone.now())
    ).select_related("user", "assigned_by")
    return Prefetch("claim", queryset=live, to_attr=LIVE_CLAIM)


def claims_attach(approvals: Iterable[ApprovalRequest]) -> list[ApprovalRequest]:
    """Set ``live_claim`` on each approval (one query); a decided approval's is always None."""
    rows = list(approvals)
    prefetch_related_objects(rows, claim_prefetch())
    for row in rows:
        if not row.is_pending:
            setattr(row, LIVE_CLAIM, None)
    return rows


def approval_claim_live(*, approval: ApprovalRequest) -> ApprovalClaim | None:
    """The approval's live claim or assignment; None when free, lapsed or no longer pending."""
    if not approval.is_pending:
        return None
    if not hasattr(approval, LIVE_CLAIM):
        claims_attach([approval])
    return getattr(approval, LIVE_CLAIM)


def assigned_to_filter(*, user: Any) -> Q:
    """Approvals assigned to ``user`` (assignments do not lapse), as a query over approvals."""
    assigned = ApprovalClaim.objects.filter(
        approval=OuterRef("pk"), user=user.pk, assigned_by__isnull=False
    )
    return Q(Exists(assigned))


def approval_assignable_users(*, approval: ApprovalRequest) -> QuerySet[Any]:
    """The active people who may decide the approval (the requester never), by name: who an
    admin or tier lead may assign it to. The service checks each again (user_may_decide)."""
    users = get_user_model().objects.filter(is_active=True).exclude(pk=approval.run.requested_by_id)
    row = policy.tier_get(approval.tier)
    group_ids = tier_group_ids(row) if row else set()
    if not group_ids:
        users = users.filter(
            Q(is_superuser=True)
            | Q(
                user_permissions__codename="decide",
                user_permissions__content_type__app_label="approvals",
            )
            | Q(
                groups__permissions__codename="decide",
                groups__permissions__content_type__app_label="approvals",
            )
        )
    else:
        if approval.escalated_at is not None and row.escalation_group_id is not None:
            group_ids = group_ids | {row.escalation_group_id}
        users = users.filter(groups__in=group_ids)
    return users.distinct().order_by("username")


def approval_claim_panel(*, approval: ApprovalRequest, user: Any) -> dict[str, Any]:
    """What the approval page's claim card shows ``user`` (templates/approvals/_claim.html)."""
    claim = approval_claim_live(approval=approval) if approval.is_pending else None
    pending = approval.is_pending and approval.expires_at > timezone.now()
    may_decide = pending and user_may_decide(user=user, approval=approval)[0]
    may_assign = pending and user_may_assign(user=user, approval=approval)[0]
    mine = claim is not None and claim.user_id == user.pk
    return {
        "pending": pending,
        "claim": claim,
        "mine": mine,
        "others": claim is not None and not mine,
        "may_claim": may_decide and not (mine and claim.is_assignment),
        "may_decide": may_decide,
        "may_assign": may_assign,
        "assignable": list(approval_assignable_users(approval=approval)) if may_assign else [],
    }
