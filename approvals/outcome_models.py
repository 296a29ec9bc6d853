"""What an agent reports it executed for an approval (external agents: agents/remote/)."""

from __future__ import annotations

from django.db import models

from core.sealed_fields import SealedJSONField
from core.sealed_query import SealedQuerySet


class ApprovalOutcome(models.Model):
    """The one reported execution of an approval's action: the args the agent ran with, its
    result, and whether those args are the ones approved (``args_match``; ``flags`` says what
    is off). Recorded as reported, never corrected: a mismatch is shown, not hidden."""

    class Status(models.TextChoices):
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    FLAG_ARGS_DIFFER = "args_differ"
    FLAG_NOT_APPROVED = "not_approved"

    # Not "outcome": the metrics annotate approvals with an "outcome" of their own.
    approval = models.OneToOneField(
        "approvals.ApprovalRequest", on_delete=models.PROTECT, related_name="outcome_report"
    )
    idempotency_key = models.CharField(max_length=64)
    status = models.CharField(max_length=10, choices=Status.choices)
    executed_args = SealedJSONField(default=dict, run_attr="approval.run_id")
    executed_args_hash = models.CharField(max_length=64)
    result = SealedJSONField(null=True, blank=True, run_attr="approval.run_id")
    # The canonical hash of the report as a whole: the same report again is a no-op (200).
    report_hash = models.CharField(max_length=64)
    args_match = models.BooleanField()
    flags = models.JSONField(default=list, blank=True)
    reported_by = models.CharField(max_length=150)
    reported_at = models.DateTimeField(auto_now_add=True)

    objects = SealedQuerySet.as_manager()

    class Meta:
        ordering = ["-reported_at", "-id"]

    def __str__(self) -> str:
        return f"outcome of #{self.approval_id} ({self.status})"
