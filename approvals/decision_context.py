"""What the approval page and API show around a decision: what happens if it is denied, if
nobody decides, and what changed while it waited."""

from __future__ import annotations

from typing import Any

from approvals.changes import approval_changes, changes_digest
from approvals.contract import payload_on_deny
from approvals.deadlines import approval_deadlines
from approvals.models import ApprovalRequest


def decision_context(*, approval: ApprovalRequest) -> dict[str, Any]:
    """``on_deny`` (a line), ``deadlines`` (None once decided), ``changes`` and their
    ``changes_digest`` (empty when nothing changed)."""
    changes = approval_changes(approval)
    return {
        "on_deny": payload_on_deny(approval.payload),
        "deadlines": approval_deadlines(approval=approval),
        "changes": changes,
        "changes_digest": changes_digest(changes) if changes else "",
    }
