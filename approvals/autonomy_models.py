"""Graduated autonomy's rows (docs/autonomy.md): the rules that let a class of gated calls run
without waiting for a person, the calls that ran so, and what shadow mode would have done.

Re-exported from approvals/models.py (Django finds the models there).
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from core.sealed_fields import SealedJSONField, SealedTextField
from core.sealed_query import SealedQuerySet


class AutonomyRule(models.Model):
    """How much autonomy one class of calls has: a tool's rule wins over its tier's.

    ``ask``: a person decides first (the default without any rule). ``shadow``: a person still
    decides, and the console records what ``sample_percent`` / ``confidence_below`` would have
    done. ``sampled``: the call runs without waiting and ``sample_percent`` % of such calls
    (drawn from the action's idempotency key) go to the review-after-the-fact queue.
    ``post_hoc``: every call runs without waiting and goes to that queue. In every mode a call
    whose stated confidence is below ``confidence_below`` waits for a person.
    """

    class Mode(models.TextChoices):
        ASK = "ask"
        SHADOW = "shadow"
        SAMPLED = "sampled"
        POST_HOC = "post_hoc"

    tool = models.CharField(
        max_length=100, blank=True, help_text="A registered tool name; empty: the tier's rule."
    )
    tier = models.ForeignKey(
        "approvals.RiskTier",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="autonomy_rules",
        help_text="The tier this rule governs (when no tool is named).",
    )
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.ASK)
    sample_percent = models.PositiveSmallIntegerField(
        default=10,
        validators=[MaxValueValidator(100)],
        help_text="Sampled (and shadow): the share of calls reviewed after the fact.",
    )
    confidence_below = models.DecimalField(
        max_digits=4,
        decimal_places=3,
        null=True,
        blank=True,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="Always ask a person when the agent's stated confidence is below this (0-1).",
    )
    evidence = models.JSONField(
        default=dict, blank=True, help_text="The advice and figures this rule was applied from."
    )
    note = models.CharField(max_length=200, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tool", "tier__level"]
        constraints = [
            models.UniqueConstraint(
                fields=["tool"], condition=~models.Q(tool=""), name="autonomy_one_per_tool"
            ),
            models.UniqueConstraint(
                fields=["tier"],
                condition=models.Q(tool="", tier__isnull=False),
                name="autonomy_one_per_tier",
            ),
            models.CheckConstraint(
                condition=(models.Q(tool="") & models.Q(tier__isnull=False))
                | (~models.Q(tool="") & models.Q(tier__isnull=True)),
                name="autonomy_tool_xor_tier",
            ),
        ]

    def __str__(self) -> str:
        scope = f"tool {self.tool}" if self.tool else f"tier {self.tier}"
        return f"{scope}: {self.mode}"


class AutonomousAction(models.Model):
    """A gated call that ran without waiting for a person, because an autonomy rule let it.

    One row per action idempotency key (the gate's replay finds it). ``review`` says where it
    stands in the review-after-the-fact queue: ``not_sampled`` calls are never queued.
    """

    class Review(models.TextChoices):
        NOT_SAMPLED = "not_sampled"
        PENDING = "pending"
        FINE = "fine"
        UNDOING = "undoing"
        UNDONE = "undone"
        UNDO_FAILED = "undo_failed"

    run = models.ForeignKey(
        "approvals.AgentRun", on_delete=models.PROTECT, related_name="autonomous_actions"
    )
    key = models.CharField(max_length=200, unique=True, help_text="The action's idempotency key.")
    tool = models.CharField(max_length=100, db_index=True)
    tier = models.CharField(max_length=40)
    args = SealedJSONField(default=dict, run_attr="run_id")
    payload = SealedJSONField(default=dict, run_attr="run_id")
    payload_hash = models.CharField(max_length=64)
    mode = models.CharField(max_length=10, choices=AutonomyRule.Mode.choices)
    rule = models.ForeignKey(
        AutonomyRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="actions"
    )
    sample_percent = models.PositiveSmallIntegerField(default=100)
    draw = models.PositiveIntegerField(help_text="0-9999, from the key; sampled when below.")
    confidence = models.DecimalField(max_digits=4, decimal_places=3, null=True, blank=True)
    review = models.CharField(max_length=12, choices=Review.choices, default=Review.PENDING)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="autonomy_reviews",
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_note = SealedTextField(blank=True, run_attr="run_id")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = SealedQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["review", "created_at"], name="autonomy_review_queue"),
            models.Index(fields=["tool", "created_at"], name="autonomy_tool_created"),
        ]

    def __str__(self) -> str:
        return f"{self.tool} {self.key} ({self.review})"


class ShadowVerdict(models.Model):
    """What the shadow rule would have done with an approval a person decides.

    ``would``: ``run`` (it would not have waited) or ``ask`` (confidence too low). ``agreed``
    is set when the approval closes: a "run" agrees with an approve of the unchanged args, an
    "ask" agrees with anything but that; an expired approval stays undecided (null).
    """

    class Would(models.TextChoices):
        RUN = "run"
        ASK = "ask"

    approval = models.OneToOneField(
        "approvals.ApprovalRequest", on_delete=models.PROTECT, related_name="shadow"
    )
    rule = models.ForeignKey(
        AutonomyRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="shadows"
    )
    tool = models.CharField(max_length=100)
    tier = models.CharField(max_length=40)
    would = models.CharField(max_length=3, choices=Would.choices)
    agreed = models.BooleanField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["tool", "created_at"], name="shadow_tool_created")]

    def __str__(self) -> str:
        return f"shadow #{self.approval_id}: would {self.would}, agreed {self.agreed}"
