"""What the approval page and API show around a decision: what happens if it is denied, if
nobody decides, what changed while it waited, and (external agents) what was executed."""

from __future__ import annotations

from typing import Any

from approvals.changes import approval_changes, changes_digest
from approvals.contract import is_external_agent, payload_on_deny
from approvals.deadlines import approval_deadlines
from approvals.models import ApprovalOutcome, ApprovalRequest
from approvals.services.outcomes import outcome_not_expected
from approvals.services.stuck import outcome_exempt


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


def approval_outcome(approval: ApprovalRequest) -> ApprovalOutcome | None:
    """What an external agent reported it executed for this approval (None: nothing yet, or
    not an external agent's: in-process effects are the ledger's, shown on the run page).
    Also while it is pending: an agent that ran it before any decision says so (flagged
    ``not_approved``), and the reviewer about to decide must see that."""
    if not is_external_agent(approval.run.agent):
        return None
    return ApprovalOutcome.objects.filter(approval=approval).first()


def outcome_context(approval: ApprovalRequest) -> dict[str, Any]:
    """The approval page's outcome card: the report, or that an approved action's is missing
    (``outcome_untold``: its run was cancelled before the agent was told, none is expected)."""
    outcome = approval_outcome(approval)
    go = (
        outcome is None
        and approval.status in (ApprovalRequest.Status.APPROVED, ApprovalRequest.Status.EDITED)
        and is_external_agent(approval.run.agent)
    )
    untold = go and outcome_not_expected(approval)
    unreportable = go and not untold and outcome_exempt(approval)
    return {
        "outcome": outcome,
        "outcome_awaited": go and not untold and not unreportable,
        "outcome_untold": untold,
        "outcome_unreportable": unreportable,
    }
