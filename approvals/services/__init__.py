"""Writes for runs, approvals and the approval policy. Each changes state and records its audit
event in one transaction (invariant 3).

- ``runs``: create, the worker's transitions, cancel, budget, flag, queueing an advance;
- ``requests``: approval requests for pending interrupts, with their due times;
- ``claims``: claiming, releasing, assigning and unassigning a pending approval;
- ``decisions``: deciding (validation, permissions, edit preview, quorum, final outcome);
- ``sweep``: reminders, escalations and expiries that are due;
- ``policy``: audited changes to tiers and tool policies, and the demo seed;
- ``autonomy_review``: reviewing an action that ran without waiting (fine, or undo).

Callers import this package (``from approvals import services as approval_services``).
"""

from __future__ import annotations

from approvals.contract import RUN_ADVANCE_TASK, TIMEOUT_ACTOR
from approvals.services.autonomy_review import (
    ReviewConflict,
    ReviewError,
    ReviewForbidden,
    ReviewInvalid,
    autonomous_action_review,
)
from approvals.services.claims import (
    ClaimConflict,
    ClaimError,
    ClaimForbidden,
    ClaimInvalid,
    approval_assign,
    approval_claim,
    approval_claim_release,
    approval_unassign,
)
from approvals.services.decision_final import approval_close
from approvals.services.decisions import approval_decide, approval_edit_preview
from approvals.services.errors import (
    ArgsInvalid,
    ChangesNotAcknowledged,
    DecisionConflict,
    DecisionError,
    DecisionForbidden,
    DecisionInvalid,
    PreviewRequired,
)
from approvals.services.policy import (
    policy_change_record,
    policy_object_delete,
    policy_seed_demo,
    policy_snapshot,
)
from approvals.services.requests import approval_requests_sync
from approvals.services.runs import (
    LeaseLostError,
    RunStopped,
    run_advance_enqueue,
    run_budget_add,
    run_create,
    run_flag,
    run_mark_cancelled,
    run_mark_completed,
    run_mark_failed,
    run_mark_queued,
    run_mark_running,
    run_mark_waiting,
    run_record_failure,
    run_record_recovery,
    run_transitions_fenced,
    run_unflag,
)
from approvals.services.sweep import (
    approval_escalate,
    approval_expire,
    approval_remind,
    approvals_sweep,
)

__all__ = [
    "RUN_ADVANCE_TASK",
    "TIMEOUT_ACTOR",
    "ArgsInvalid",
    "ChangesNotAcknowledged",
    "ClaimConflict",
    "ClaimError",
    "ClaimForbidden",
    "ClaimInvalid",
    "DecisionConflict",
    "DecisionError",
    "DecisionForbidden",
    "DecisionInvalid",
    "PreviewRequired",
    "ReviewConflict",
    "ReviewError",
    "ReviewForbidden",
    "ReviewInvalid",
    "LeaseLostError",
    "RunStopped",
    "approval_assign",
    "approval_claim",
    "approval_claim_release",
    "approval_close",
    "approval_decide",
    "approval_edit_preview",
    "approval_escalate",
    "approval_expire",
    "approval_remind",
    "approval_requests_sync",
    "approval_unassign",
    "autonomous_action_review",
    "approvals_sweep",
    "policy_change_record",
    "policy_object_delete",
    "policy_seed_demo",
    "policy_snapshot",
    "run_advance_enqueue",
    "run_budget_add",
    "run_create",
    "run_flag",
    "run_mark_cancelled",
    "run_mark_completed",
    "run_mark_failed",
    "run_mark_queued",
    "run_mark_running",
    "run_mark_waiting",
    "run_record_failure",
    "run_record_recovery",
    "run_transitions_fenced",
    "run_unflag",
]
