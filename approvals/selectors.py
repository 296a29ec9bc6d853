"""Reads for runs and approvals. Views and APIs use these, never ad-hoc multi-relation queries.

Reads that depend on the reader take it (``fetched_by``) and apply permissions.run_visible_filter:
what the reader may not see raises ``DoesNotExist`` or is left out of a list.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from approvals.claim_selectors import assigned_to_filter, claim_prefetch
from approvals.models import AgentRun, ApprovalRequest, ApprovalVote, RiskTier
from approvals.permissions import approval_decidable_filter, run_visible_filter


def _approvals(
    *,
    status: str | None = None,
    tier: str | None = None,
    agent: str | None = None,
    tool: str | None = None,
    run_id: Any = None,
    q: str | None = None,
    decided: bool = True,
) -> QuerySet[ApprovalRequest]:
    related = ("run", "run__requested_by") + (("decided_by",) if decided else ())
    qs = ApprovalRequest.objects.select_related(*related)
    if status:
        qs = qs.filter(status=status)
    if tier:
        qs = qs.filter(tier=tier)
    if agent:
        qs = qs.filter(run__agent=agent)
    if tool:
        qs = qs.filter(tool=tool)
    if run_id:
        qs = qs.filter(run_id=run_id)
    if q:
        qs = qs.filter(
            Q(tool__icontains=q)
            | Q(run__agent__icontains=q)
            | Q(run__requested_by__username__icontains=q)
        )
    return qs.order_by("expires_at", "id")


def approval_list(
    *,
    fetched_by: Any,
    status: str | None = None,
    tier: str | None = None,
    agent: str | None = None,
    tool: str | None = None,
    run_id: Any = None,
    q: str | None = None,
) -> QuerySet[ApprovalRequest]:
    """The approvals ``fetched_by`` may see, soonest expiry first."""
    qs = _approvals(status=status, tier=tier, agent=agent, tool=tool, run_id=run_id, q=q)
    return qs.filter(run_visible_filter(user=fetched_by, via="run__"))


def approval_list_pending(
    *,
    user: Any,
    tier: str | None = None,
    agent: str | None = None,
    tool: str | None = None,
    mine: bool = True,
    q: str | None = None,
    run_id: Any = None,
    assigned: bool = False,
) -> QuerySet[ApprovalRequest]:
    """Pending, unexpired approvals, soonest expiry first.

    ``mine`` keeps those ``user`` may decide (who may decide an approval may see it);
    otherwise those ``user`` may see. ``assigned`` keeps those assigned to ``user`` (of
    those they may see, whatever ``mine`` says).
    """
    # No decider to join (a pending approval has none): that LEFT JOIN was planned as a hash
    # join, which gives up the approval_queue index's order, so Postgres read and sorted every
    # pending approval instead of stopping after a page (it estimates few: pending and
    # unexpired are correlated). With nested loops only, the index order is the page order.
    qs = _approvals(
        status=ApprovalRequest.Status.PENDING,
        tier=tier,
        agent=agent,
        tool=tool,
        run_id=run_id,
        q=q,
        decided=False,
    )
    qs = qs.filter(expires_at__gt=timezone.now())
    if assigned:
        qs = qs.filter(assigned_to_filter(user=user))
    if not mine or assigned:
        return qs.filter(run_visible_filter(user=user, via="run__"))
    decidable = approval_decidable_filter(user=user)
    if decidable is None:
        return qs.none()
    current_round = ApprovalVote.objects.filter(
        approval=OuterRef("pk"), round=OuterRef("quorum_round"), user=user
    )
    return qs.filter(decidable).exclude(run__requested_by=user).exclude(Exists(current_round))


def approval_quorum(*, approval: ApprovalRequest) -> dict[str, Any]:
    """Quorum progress for the detail page: required, received (current round), approvers."""
    tier = RiskTier.objects.select_related("required_group").filter(name=approval.tier).first()
    required = max(1, tier.required_approvals) if tier else 1
    if approval.status in (ApprovalRequest.Status.APPROVED, ApprovalRequest.Status.EDITED):
        voters = [name.strip() for name in approval.decided_by_label.split(",") if name.strip()]
    else:
        voters = list(
            approval.votes.filter(round=approval.quorum_round, decision__in=["approve", "edit"])
            .order_by("id")
            .values_list("user__username", flat=True)
        )
    received = len(voters)
    return {
        "required": required,
        "received": received,
        "missing": max(0, required - received) if approval.is_pending else 0,
        "approvers": voters,
        "required_group": tier.required_group.name if tier and tier.required_group_id else "",
        "escalated": approval.escalated_at is not None,
    }


def approval_get(*, pk: int, fetched_by: Any) -> ApprovalRequest:
    """The approval, if ``fetched_by`` may see its run; ``DoesNotExist`` otherwise."""
    return _approvals().filter(run_visible_filter(user=fetched_by, via="run__")).get(pk=pk)


def run_list(
    *, fetched_by: Any, status: str | None = None, agent: str | None = None
) -> QuerySet[AgentRun]:
    """The runs ``fetched_by`` may see, newest first."""
    qs = AgentRun.objects.select_related("requested_by").filter(run_visible_filter(user=fetched_by))
    if status:
        qs = qs.filter(status=status)
    if agent:
        qs = qs.filter(agent=agent)
    return qs.order_by("-created_at")


def run_get(*, pk: Any, fetched_by: Any) -> AgentRun:
    """The run, if ``fetched_by`` may see it; ``DoesNotExist`` otherwise."""
    return (
        AgentRun.objects.select_related("requested_by")
        .filter(run_visible_filter(user=fetched_by))
        .get(pk=pk)
    )


def run_approvals(*, run: AgentRun) -> QuerySet[ApprovalRequest]:
    return (
        run.approvals.select_related("decided_by")
        .prefetch_related(claim_prefetch())
        .order_by("created_at", "id")
    )
