"""Stuck items: a run or a tier's queue that stopped moving, escalated once until it clears."""

from __future__ import annotations

from django.db import models


class StuckItem(models.Model):
    """One stuck thing, raised once (a notification and an audit event) and cleared when it
    moves again. At most one open row per (kind, key): a second sweep, or two sweeps at once,
    find it (or fail to insert it) and raise nothing more."""

    class Kind(models.TextChoices):
        # A waiting run with no pending approval: its interrupt has nobody to answer it.
        ORPHANED_INTERRUPT = "orphaned_interrupt", "Waiting with no pending approval"
        # A running run whose lease lapsed long ago: no worker advances it.
        RUN_PAST_DEADLINE = "run_past_deadline", "Running past its lease deadline"
        # A tier whose oldest pending approval is older than the tier's threshold.
        QUEUE_TOO_OLD = "queue_too_old", "Approval queue older than the tier's threshold"
        # An external agent's approved (or edited) action whose outcome it never reported.
        OUTCOME_NOT_REPORTED = "outcome_not_reported", "Decided, outcome never reported"

    kind = models.CharField(max_length=24, choices=Kind.choices)
    # The run's id, or the tier's name for a queue.
    key = models.CharField(max_length=100)
    run = models.ForeignKey(
        "approvals.AgentRun",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="stuck_items",
    )
    detail = models.CharField(max_length=500, blank=True)
    raised_at = models.DateTimeField()
    cleared_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-raised_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "key"],
                condition=models.Q(cleared_at__isnull=True),
                name="stuck_one_open_per_object",
            )
        ]

    def __str__(self) -> str:
        state = "cleared" if self.cleared_at else "open"
        return f"{self.get_kind_display()}: {self.key} ({state})"
