"""The effects ledger, run-start idempotency keys, and the sandbox systems.

Sandbox tables stand in for external services (a ticket tracker, a deploy system, a payment
provider, an inventory service, a notifier). Each one dedupes on an idempotency key, as
Stripe does, and the console labels their data as sandbox data wherever it appears.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from core.sealed_fields import SealedJSONField, SealedTextField


class EffectQuerySet(models.QuerySet):
    def delete(self):
        raise PermissionError("the effects ledger is append-only: delete is refused")


class Settlement(models.TextChoices):
    """A person's answer for an effect in doubt."""

    DONE = "done", "It happened"
    NOT_DONE = "not_done", "It did not happen: do not call it"
    RETRY = "retry", "Call it again"


class Effect(models.Model):
    """One side effect, claimed by its idempotency key before it runs (invariant 1).

    Append-only like the audit trail: a row is never deleted (that would re-arm the effect),
    and its key, run, tool, args and fingerprint never change; the database refuses both
    (migration 0004). Only the outcome (status, result, error, attempts) moves on. Args,
    result and error are sealed: an ``update()`` takes them only from ``effect_fields_seal``.
    """

    class Status(models.TextChoices):
        CLAIMED = "claimed"
        # The call may or may not have reached the downstream (a timeout): settled by asking
        # the downstream by key, never assumed done or failed (invariant 13).
        IN_DOUBT = "in_doubt"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        COMPENSATED = "compensated"

    key = models.CharField(max_length=200, unique=True)
    run = models.ForeignKey("approvals.AgentRun", on_delete=models.PROTECT, related_name="effects")
    tool = models.CharField(max_length=100)
    # Personal data, sealed under the run's data key (core/sealing.py); the fingerprint is the
    # sha256 of the plaintext args, so a retry with the same args still matches.
    args = SealedJSONField(default=dict, run_attr="run_id")
    args_fingerprint = models.CharField(max_length=64)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.CLAIMED)
    result = SealedJSONField(default=dict, blank=True, run_attr="run_id")
    error = SealedTextField(blank=True, run_attr="run_id")
    attempts = models.PositiveIntegerField(default=0)
    # A compensation is an effect of its own (key "<key>:compensate") pointing at what it undoes.
    compensates = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="compensation"
    )
    approval = models.ForeignKey(
        "approvals.ApprovalRequest",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="effects",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Handed to a person because nobody can settle it automatically (once; invariant 13).
    escalated_at = models.DateTimeField(null=True, blank=True)
    # The tier whose approvers may settle it, fixed when it is escalated: they see its run
    # (approvals.permissions.run_visible_filter), even a run that asked nobody.
    tier = models.CharField(max_length=40, blank=True)
    # What that person said: it happened, it did not (and must not be called), call it again.
    settlement = models.CharField(max_length=10, blank=True)
    settled_by = models.CharField(max_length=150, blank=True)

    objects = EffectQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "id"]
        permissions = [("time_travel", "Can view past run states and fork from them")]
        indexes = [
            # The sweep's reconcile pass (agents/effects/reconcile.py): only unsettled effects,
            # oldest first; and the escalated effects whose tier is still blank.
            models.Index(
                fields=["updated_at", "id"],
                name="effect_unsettled_due",
                condition=models.Q(status__in=["claimed", "in_doubt"]),
            ),
            models.Index(
                fields=["id"],
                name="effect_tier_blank",
                condition=models.Q(escalated_at__isnull=False, tier=""),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool} [{self.key}] {self.status}"

    def delete(self, *args, **kwargs):
        raise PermissionError("the effects ledger is append-only: delete is refused")


class RunStartKey(models.Model):
    """An Idempotency-Key sent with POST /api/runs/ (per user)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    key = models.CharField(max_length=200)
    request_hash = models.CharField(max_length=64)
    run = models.ForeignKey(
        "approvals.AgentRun", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="run_start_key_unique"),
        ]

    def __str__(self) -> str:
        return f"run start key {self.key}"


class SandboxRecord(models.Model):
    """Common fields of every sandbox system's rows."""

    idempotency_key = models.CharField(max_length=200, unique=True)
    # Fingerprint of the request that created the row: reusing a key with other parameters is
    # refused, as Stripe refuses it.
    request_hash = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True


class SandboxTicket(SandboxRecord):
    class Status(models.TextChoices):
        OPEN = "open"
        CLOSED = "closed"

    service = models.CharField(max_length=100)
    title = models.CharField(max_length=300)
    severity = models.CharField(max_length=10)
    body = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)

    def __str__(self) -> str:
        return f"TICKET-{self.pk}: {self.title}"


class SandboxDeploy(SandboxRecord):
    """A deploy recorded by the sandbox deploy system (seeded, or produced by a rollback)."""

    service = models.CharField(max_length=100, db_index=True)
    version = models.CharField(max_length=50)
    previous_version = models.CharField(max_length=50, blank=True)
    is_rollback = models.BooleanField(default=False)
    deployed_at = models.DateTimeField()

    class Meta:
        ordering = ["-deployed_at"]

    def __str__(self) -> str:
        return f"{self.service}@{self.version}"


class SandboxPayment(SandboxRecord):
    """A money movement: a charge (positive) or a refund (negative)."""

    class Kind(models.TextChoices):
        CHARGE = "charge"
        REFUND = "refund"
        REFUND_REVERSAL = "refund_reversal"

    order_id = models.CharField(max_length=50, db_index=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    amount = models.DecimalField(max_digits=12, decimal_places=2)
    currency = models.CharField(max_length=3, default="USD")

    def __str__(self) -> str:
        return f"{self.kind} {self.amount} {self.currency} for {self.order_id}"


class SandboxInventoryMovement(SandboxRecord):
    sku = models.CharField(max_length=50, db_index=True)
    delta = models.IntegerField()
    reason = models.CharField(max_length=200, blank=True)

    def __str__(self) -> str:
        return f"{self.sku} {self.delta:+d}"


class SandboxNotification(SandboxRecord):
    channel = models.CharField(max_length=30)
    recipient = models.CharField(max_length=200)
    message = models.TextField()

    def __str__(self) -> str:
        return f"{self.channel} to {self.recipient}"


# Checkpoint retention lives in its own module (for size); the app's models are imported here.
from agents.erasure_models import Erasure, SubjectIndex  # noqa: E402, F401
from agents.remote.connector_models import AgentServerConnector, ConnectorResume  # noqa: E402, F401
from agents.remote.models import ExternalAgent, ExternalAgentKey, RemoteRequest  # noqa: E402, F401
from agents.retention_models import (  # noqa: E402, F401
    PrunedRun,
    RetentionAction,
    RetentionCursor,
    RetentionPass,
    RetentionPolicy,
)
