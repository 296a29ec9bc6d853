"""Checkpoint retention: the per-agent policy, the runs already pruned, and where each pass
stopped (agents/runtime/retention.py)."""

from __future__ import annotations

from django.db import models


class RetentionAction(models.TextChoices):
    """What happens to a finished run's checkpoints once its retention period has passed."""

    FINAL = "final", "Prune to the final checkpoint"
    DELETE = "delete", "Delete the thread's checkpoints"


class RetentionPolicy(models.Model):
    """How long one agent's finished runs keep their full checkpoint history. Agents without
    a row follow CHECKPOINT_RETENTION_DAYS and CHECKPOINT_RETENTION_ACTION."""

    agent = models.CharField(max_length=100, unique=True)
    keep_days = models.PositiveIntegerField(
        help_text="Days a finished run keeps every checkpoint; 0 keeps them forever."
    )
    action = models.CharField(
        max_length=10, choices=RetentionAction.choices, default=RetentionAction.FINAL
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["agent"]
        verbose_name = "checkpoint retention policy"
        verbose_name_plural = "checkpoint retention policies"

    def __str__(self) -> str:
        return f"{self.agent}: {self.keep_days} d, {self.action}"


class PrunedRun(models.Model):
    """A run whose checkpoints retention pruned (or chose to leave, with the reason): a pass
    never selects it again."""

    class Outcome(models.TextChoices):
        FINAL = "final", "Pruned to the final checkpoint"
        DELETE = "delete", "Checkpoints deleted"
        KEPT = "kept", "Kept: retention cannot prune it"

    run = models.OneToOneField(
        "approvals.AgentRun", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    reason = models.CharField(max_length=200, blank=True)
    pruned_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["pruned_at"], name="pruned_run_at")]

    def __str__(self) -> str:
        return f"run {str(self.run_id)[:8]}: {self.outcome}"


class RetentionCursor(models.Model):
    """Where the passes of one policy scope stopped, in (finished_at, id) order, so a pass
    reads only runs it has not seen; scope is the agent name, or "" for the default."""

    scope = models.CharField(max_length=100, unique=True)
    finished_at = models.DateTimeField()
    run_id = models.UUIDField()

    def __str__(self) -> str:
        return f"{self.scope or '(default)'} at {self.finished_at:%Y-%m-%d %H:%M}"


class RetentionPass(models.Model):
    """One prune pass that pruned or kept something (the ops page shows the last ones; the
    audit event "checkpoints.pruned" is the record that stays)."""

    at = models.DateTimeField()
    runs_final = models.PositiveIntegerField(default=0)
    runs_deleted = models.PositiveIntegerField(default=0)
    runs_kept = models.PositiveIntegerField(default=0)
    runs_deferred = models.PositiveIntegerField(default=0)
    checkpoints = models.PositiveBigIntegerField(default=0)
    writes = models.PositiveBigIntegerField(default=0)
    blobs = models.PositiveBigIntegerField(default=0)
    seconds = models.FloatField(default=0)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"prune pass at {self.at:%Y-%m-%d %H:%M:%S}"
