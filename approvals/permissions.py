"""Who may decide an approval (invariant 7: enforced on the server)."""

from __future__ import annotations

from typing import Any

from approvals.models import ApprovalRequest


def user_may_decide(*, user: Any, approval: ApprovalRequest) -> tuple[bool, str]:
    """(allowed, reason). Holders of approvals.decide, never the run's requester (four eyes)."""
    if not user.is_authenticated or not user.is_active:
        return False, "You must be logged in to decide."
    if approval.run.requested_by_id == user.pk:
        return False, "You requested this run; someone else must decide (four eyes)."
    if not user.has_perm("approvals.decide"):
        return False, "You do not have the right to decide approvals."
    return True, ""
