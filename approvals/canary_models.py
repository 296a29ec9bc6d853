"""Canaries (docs/autonomy.md): test proposals compliance plants into reviewers'
queues to measure how often reviewers catch a proposal that must be rejected.

A canary's run is inert by construction: the ledger refuses any effect of a run that has a
Canary row (agents/effects/claim.py), and the advance never invokes a graph for it.
Re-exported from approvals/models.py (Django finds the models there).
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


class CanaryPlan(models.Model):
    """Compliance's configuration: plant ``per_day`` canaries a day into ``tier``'s queue."""

    tier = models.ForeignKey(
        "approvals.RiskTier", on_delete=models.CASCADE, related_name="canary_plans"
    )
    templates = models.JSONField(
        default=list,
        blank=True,
        help_text="Template names (approvals/canary_templates.py); empty: every template.",
    )
    per_day = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(288)],
        help_text="Canaries planted per day by this plan (evenly spaced by the minute sweep).",
    )
    requested_as = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The user the canary runs appear to come from (never a reviewer of the tier); "
        "empty: the service account agent-requests.",
    )
    is_active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tier__level", "id"]

    def __str__(self) -> str:
        return f"{self.per_day}/day into {self.tier.name}"


class Canary(models.Model):
    """One planted test proposal: its approval, its inert run, and how the reviewer did."""

    class Outcome(models.TextChoices):
        OPEN = "", "open"
        CAUGHT = "caught"
        MISSED = "missed"
        EXPIRED = "expired"

    approval = models.OneToOneField(
        "approvals.ApprovalRequest", on_delete=models.PROTECT, related_name="+"
    )
    # related_name "+": nothing reviewer-facing can follow a run to its canary row.
    run = models.OneToOneField("approvals.AgentRun", on_delete=models.PROTECT, related_name="+")
    plan = models.ForeignKey(
        CanaryPlan, null=True, blank=True, on_delete=models.SET_NULL, related_name="canaries"
    )
    template = models.CharField(max_length=60)
    expected = models.CharField(max_length=10, default="reject")
    # What it would have done had it been real (told to the reviewer after the decision).
    would_have = models.CharField(max_length=300, blank=True)
    outcome = models.CharField(max_length=10, choices=Outcome.choices, default="", blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    decision = models.CharField(max_length=10, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    told_at = models.DateTimeField(null=True, blank=True)
    planted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-planted_at", "-id"]
        indexes = [
            models.Index(fields=["decided_by", "decided_at"], name="canary_decider"),
            models.Index(fields=["plan", "-planted_at"], name="canary_plan_last"),
        ]

    def __str__(self) -> str:
        return f"canary {self.template} #{self.approval_id} ({self.outcome or 'open'})"
