"""The approval policy's rows: risk tiers, tool policies and their rules, the policy version.

Re-exported from approvals/models.py (the app's models module stays readable in one sitting).
"""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.core.validators import MinValueValidator
from django.db import models


class PolicyVersion(models.Model):
    """Singleton (pk=1): bumped by every policy change; approvals record the number."""

    number = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"policy v{self.number}"


class RiskTier(models.Model):
    """A risk tier: whether approval is needed, who may give it, quorum and timing."""

    class ExpiryDecision(models.TextChoices):
        REJECT = "reject"
        APPROVE = "approve"

    name = models.SlugField(max_length=40, unique=True, help_text="Referenced by tools and rules.")
    level = models.PositiveSmallIntegerField(
        unique=True, help_text="Higher means riskier; an edit may not raise it unchecked."
    )
    requires_approval = models.BooleanField(
        default=True, help_text="Off: calls in this tier run without asking anyone."
    )
    approver_groups = models.ManyToManyField(
        Group,
        blank=True,
        related_name="approver_for_tiers",
        help_text="Members may decide. With no group, holders of 'Can decide approvals' may.",
    )
    required_group = models.ForeignKey(
        Group,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="required_for_tiers",
        help_text="If set, at least one approving vote must come from a member of this group.",
    )
    required_approvals = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1)],
        help_text="Quorum: distinct people who must approve (the requester never counts).",
    )
    ttl_seconds = models.PositiveIntegerField(
        default=24 * 3600,
        validators=[MinValueValidator(1)],
        help_text="Time to live: seconds from request to expiry.",
    )
    remind_before_seconds = models.PositiveIntegerField(
        default=0, help_text="Remind the approvers this many seconds before expiry (0: never)."
    )
    escalate_after_seconds = models.PositiveIntegerField(
        default=0,
        help_text="Escalate this many seconds after the request (0: never); needs a group.",
    )
    escalation_group = models.ForeignKey(
        Group,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="escalation_for_tiers",
        help_text="Members may also decide once the approval has escalated, and are notified.",
    )
    expiry_decision = models.CharField(
        max_length=10,
        choices=ExpiryDecision.choices,
        default=ExpiryDecision.REJECT,
        help_text="Applied by system:timeout when nobody decided in time.",
    )
    allowed_decisions = models.JSONField(
        default=list,
        blank=True,
        help_text='Subset of ["approve", "edit", "reject", "respond"]; empty allows all.',
    )
    email_notifications = models.BooleanField(
        default=True, help_text="Email approvers and requesters about this tier's approvals."
    )
    stuck_after_seconds = models.PositiveIntegerField(
        default=4 * 3600,
        help_text="Escalate once when this tier's oldest pending approval is older (0: never).",
    )
    lead_group = models.ForeignKey(
        Group,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="lead_for_tiers",
        help_text="Members may assign this tier's approvals.",
    )
    webhook_endpoint = models.ForeignKey(
        "approvals.WebhookEndpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tiers",
        help_text="Signed JSON POST with a Slack-compatible 'text' for every event.",
    )

    class Meta:
        ordering = ["level"]

    def __str__(self) -> str:
        return self.name


class ToolPolicy(models.Model):
    """The tier of a tool, overriding its code default; rules may raise it by args."""

    tool = models.CharField(max_length=100, unique=True, help_text="Registered tool name.")
    tier = models.ForeignKey(
        RiskTier, on_delete=models.PROTECT, related_name="tool_policies", help_text="Base tier."
    )
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["tool"]
        verbose_name_plural = "tool policies"

    def __str__(self) -> str:
        return f"{self.tool} -> {self.tier}"


class ToolPolicyRule(models.Model):
    """``<arg> <op> <value>`` -> tier; rules run in position order, the first match wins."""

    class Op(models.TextChoices):
        GT = "gt", ">"
        GTE = "gte", ">="
        LT = "lt", "<"
        LTE = "lte", "<="
        EQ = "eq", "=="
        NE = "ne", "!="

    policy = models.ForeignKey(ToolPolicy, on_delete=models.CASCADE, related_name="rules")
    position = models.PositiveSmallIntegerField(default=0, help_text="Lower runs first.")
    arg = models.CharField(max_length=100, help_text="Top-level argument name, e.g. amount.")
    op = models.CharField(max_length=3, choices=Op.choices)
    value = models.CharField(
        max_length=200, help_text="Compared as a number when both sides are numbers."
    )
    tier = models.ForeignKey(RiskTier, on_delete=models.PROTECT, related_name="rules")

    class Meta:
        ordering = ["policy", "position", "id"]

    def __str__(self) -> str:
        return f"{self.arg} {self.get_op_display()} {self.value} -> {self.tier}"

    def clean(self) -> None:
        from decimal import Decimal, InvalidOperation

        from django.core.exceptions import ValidationError

        if self.op in (self.Op.GT, self.Op.GTE, self.Op.LT, self.Op.LTE):
            try:
                number = Decimal(self.value.strip())
            except (InvalidOperation, ValueError, AttributeError):
                number = None
            # NaN and infinities are no threshold: policy._number() reads only finite numbers,
            # so such a rule would never match.
            if number is None or not number.is_finite():
                raise ValidationError({"value": "must be a number for <, <=, > and >="})


# The metrics rollups live in their own module (for size); imported here so Django finds them.
