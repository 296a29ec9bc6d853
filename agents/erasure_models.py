"""Erasure of runs' personal data (agents/erasure.py) and the blind index that finds the runs
naming a data subject (agents/subjects.py)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Erasure(models.Model):
    """One erasure: who asked, why, which runs. Never the subject it was asked for.

    ``keys_destroyed``: the runs' data keys are gone (their data reads "erased") but their
    checkpoints may remain; the every-minute sweep (or ``erase --resume``) deletes them and
    moves the row to ``completed``.
    """

    class Kind(models.TextChoices):
        RUN = "run"
        SUBJECT = "subject"

    class Status(models.TextChoices):
        KEYS_DESTROYED = "keys_destroyed"
        COMPLETED = "completed"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    username = models.CharField(max_length=150)
    reason = models.TextField()
    kind = models.CharField(max_length=10, choices=Kind.choices)
    run_ids = models.JSONField(default=list)
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.KEYS_DESTROYED, db_index=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        default_permissions = ("view",)
        permissions = [("erase_run", "Can erase the personal data of runs")]

    def __str__(self) -> str:
        return (
            f"erasure #{self.pk} of {len(self.run_ids)} run(s) by {self.username} ({self.status})"
        )


class SubjectIndex(models.Model):
    """A keyed digest of one data subject a run's input names (an e-mail, a customer id).

    ``digest = HMAC-SHA256(HKDF(master key ``key_id``, "console-blind-index"), kind:value)``:
    without the master key it says nothing about the value, and it confirms a guess only to
    someone who holds that key.
    """

    run = models.ForeignKey("approvals.AgentRun", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=30)
    digest = models.CharField(max_length=64, db_index=True)
    key_id = models.CharField(max_length=32)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "kind", "digest"], name="subject_index_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} subject of run {self.run_id}"
