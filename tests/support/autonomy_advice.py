"""Measured data for the autonomy advice tests: closed approvals counted in the metrics
rollups (as approval_close counts them), autonomous actions with their review, shadow verdicts.
"""

from __future__ import annotations

import datetime as dt
import uuid

from django.contrib.auth.models import User
from django.utils import timezone

from approvals.autonomy_models import AutonomousAction, ShadowVerdict
from approvals.models import AgentRun, ApprovalRequest
from approvals.rollups import approvals_rollup_add
from tests.support.factories import ApprovalFactory, RunFactory

STATUS = {
    "approve": ApprovalRequest.Status.APPROVED,
    "edit": ApprovalRequest.Status.EDITED,
    "reject": ApprovalRequest.Status.REJECTED,
    "respond": ApprovalRequest.Status.RESPONDED,
    "expired": ApprovalRequest.Status.EXPIRED,
}


def closed_approvals(
    *,
    by: User,
    tool: str = "refund_order",
    tier: str = "write",
    run: AgentRun | None = None,
    seconds: float = 10,
    reasons: dict[str, int] | None = None,
    **counts: int,
) -> list[ApprovalRequest]:
    """``counts`` closed approvals per outcome (approve=58, reject=2, expired=1 ...), decided
    by ``by`` ``seconds`` after their creation (expired ones: by nobody), counted in the
    rollups. ``reasons`` gives the first rejections their reason ({"unsafe": 1})."""
    run = run or RunFactory(requested_by=by)
    now = timezone.now()
    created_at = now - dt.timedelta(seconds=seconds)
    pending_reasons = [r for r, n in (reasons or {}).items() for _ in range(n)]
    rows = []
    for outcome, n in counts.items():
        for _ in range(n):
            person = None if outcome == "expired" else by
            reason = ""
            if outcome == "reject" and pending_reasons:
                reason = pending_reasons.pop(0)
            rows.append(
                ApprovalFactory(
                    run=run,
                    tool=tool,
                    tier=tier,
                    created_at=created_at,
                    status=STATUS[outcome],
                    decided_by=person,
                    decided_by_label=by.get_username() if person else "system:timeout",
                    decided_after=dt.timedelta(seconds=seconds),
                    reject_reason=reason,
                )
            )
    approvals_rollup_add(approvals=rows)
    return rows


def autonomous_actions(
    *, run: AgentRun, tool: str = "refund_order", tier: str = "write", **reviews: int
) -> None:
    """Autonomous actions per review state (fine=37, undone=3 ...)."""
    for review, n in reviews.items():
        for _ in range(n):
            AutonomousAction.objects.create(
                run=run,
                key=f"{run.thread_id}:{uuid.uuid4().hex}",
                tool=tool,
                tier=tier,
                payload_hash="0" * 64,
                mode="sampled",
                draw=0,
                review=review,
            )


def shadow_verdicts(*, approvals: list[ApprovalRequest], agreed: int, would: str = "run") -> None:
    """One decided shadow verdict per approval; the first ``agreed`` agreed."""
    for index, approval in enumerate(approvals):
        ShadowVerdict.objects.create(
            approval=approval,
            tool=approval.tool,
            tier=approval.tier,
            would=would,
            agreed=index < agreed,
            decided_at=timezone.now(),
        )
