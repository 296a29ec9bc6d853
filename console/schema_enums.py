"""The OpenAPI schema's names for its enums (SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"]):
each choice set of a field named alike gets its own name."""

from __future__ import annotations

ENUM_NAME_OVERRIDES = {
    "RunStatusEnum": "approvals.models.AgentRun.Status",
    "ApprovalStatusEnum": "approvals.models.ApprovalRequest.Status",
    "EffectStatusEnum": "agents.models.Effect.Status",
    # The remote approval service (agents/remote/).
    "RemoteRequestStatusEnum": "agents.remote.models.RemoteRequest.Status",
    "RemoteApprovalStatusEnum": [
        (s, s)
        for s in ("pending", "approved", "edited", "rejected", "responded", "expired", "cancelled")
    ],
    "OutcomeStatusEnum": "approvals.models.ApprovalOutcome.Status",
    # How an external agent ends its thread (agents/remote/threads.py).
    # Graduated autonomy (approvals/autonomy_models.py, approvals/advice.py).
    "AutonomyModeEnum": "approvals.autonomy_models.AutonomyRule.Mode",
    "RejectReasonEnum": "approvals.models.ApprovalRequest.RejectReason",
    "ThreadEndStatusEnum": [("completed", "completed"), ("failed", "failed")],
}
