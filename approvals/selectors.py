"""Reads for runs and approvals. Views and APIs use these, never ad-hoc multi-relation queries."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from approvals.models import AgentRun, ApprovalRequest


def approval_list(
    *,
    status: str | None = None,
    tier: str | None = None,
    agent: str | None = None,
    tool: str | None = None,
    run_id: Any = None,
    q: str | None = None,
) -> QuerySet[ApprovalRequest]:
    qs = ApprovalRequest.objects.select_related("run", "run__requested_by", "decided_by")
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


def approval_list_pending(
    *,
    user: Any,
    tier: str | None = None,
    agent: str | None = None,
    tool: str | None = None,
    mine: bool = True,
    q: str | None = None,
) -> QuerySet[ApprovalRequest]:
    """Pending, unexpired approvals, soonest expiry first; ``mine`` keeps those ``user`` may decide."""
    qs = approval_list(
        status=ApprovalRequest.Status.PENDING, tier=tier, agent=agent, tool=tool, q=q
    )
    qs = qs.filter(expires_at__gt=timezone.now())
    if mine:
        if not user.has_perm("approvals.decide"):
            return qs.none()
        qs = qs.exclude(run__requested_by=user)
    return qs


def approval_get(*, approval_id: int) -> ApprovalRequest:
    return ApprovalRequest.objects.select_related("run", "run__requested_by", "decided_by").get(
        pk=approval_id
    )


def run_list(*, status: str | None = None, agent: str | None = None) -> QuerySet[AgentRun]:
    qs = AgentRun.objects.select_related("requested_by")
    if status:
        qs = qs.filter(status=status)
    if agent:
        qs = qs.filter(agent=agent)
    return qs.order_by("-created_at")


def run_get(*, run_id: Any) -> AgentRun:
    return AgentRun.objects.select_related("requested_by").get(pk=run_id)


def run_approvals(*, run: AgentRun) -> QuerySet[ApprovalRequest]:
    return run.approvals.select_related("decided_by").order_by("created_at", "id")


def run_decided_pending_interrupts(*, run: AgentRun) -> QuerySet[ApprovalRequest]:
    """Approvals of this run that are decided (or expired with a default decision)."""
    return run.approvals.exclude(status=ApprovalRequest.Status.PENDING).order_by(
        "interrupt_id", "action_index"
    )
