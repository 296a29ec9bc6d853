"""Runs and the approvals they wait on."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from approvals.claim_models import ApprovalClaim  # noqa: F401

# The outbox's models live in their own module (for size); the app's models are imported from here.
from approvals.notification_models import (  # noqa: F401
    Notification,
    WebhookEndpoint,
    webhook_secret_new,
)
from approvals.stuck_models import StuckItem  # noqa: F401
from core.sealed_fields import SealedJSONField, SealedTextField
from core.sealed_query import SealedQuerySet


class AgentRun(models.Model):
    """One durable execution of an agent graph (one LangGraph thread)."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        WAITING = "waiting"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"
        DEAD = "dead"

    TERMINAL = (Status.COMPLETED, Status.FAILED, Status.CANCELLED, Status.DEAD)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    thread_id = models.CharField(max_length=64, unique=True)
    agent = models.CharField(max_length=100, db_index=True)
    graph_version = models.CharField(max_length=40)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.QUEUED)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="agent_runs"
    )
    # An external agent's runs (agents/remote/): the members of this group see them as their
    # requester does; the requester itself is the agent's service user.
    owner_group = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Personal data: sealed under the run's data key (core/sealing.py).
    input = SealedJSONField(default=dict, run_attr="id")
    output = SealedJSONField(default=dict, blank=True, run_attr="id")
    error = SealedTextField(blank=True, run_attr="id")
    # Set when the runner refuses to resume (e.g. the pending node no longer exists).
    flag = models.CharField(max_length=200, blank=True)
    resume_count = models.PositiveIntegerField(default=0)
    failure_count = models.PositiveIntegerField(default=0)
    steps_used = models.PositiveIntegerField(default=0)
    tokens_used = models.PositiveIntegerField(default=0)
    cancel_requested = models.BooleanField(default=False)
    # Set whenever an advance is queued; the worker holding the lease clears it when it takes
    # the run and re-queues the run on release if it was set meanwhile (no lost wake-ups).
    wake_requested = models.BooleanField(default=False)
    # A state migration computed (once) for the thread's move to ``graph_version`` under the
    # agent's "migrate" policy, kept until the resume that applies it (invariant 10).
    pending_migration = SealedJSONField(null=True, blank=True, run_attr="id")
    # Set on a run forked from another run's checkpoint ("fork from here").
    parent_run = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks"
    )
    forked_from_checkpoint = models.CharField(max_length=64, blank=True)
    lease_owner = models.CharField(max_length=100, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Grows by one at every lease taken; each checkpoint records the epoch it was written under
    # (agents/runtime/fenced_saver.py), so a worker that lost the lease cannot move the thread.
    lease_epoch = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Set by erasure (agents/erasure.py): the run's data key is destroyed, its personal data
    # reads as "erased", and nothing advances it again.
    erased_at = models.DateTimeField(null=True, blank=True)

    # Lists open their sealed values after one key query (core/sealed_query.py).
    objects = SealedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "-created_at"], name="run_status_created"),
            models.Index(fields=["status", "lease_expires_at"], name="run_status_lease"),
            # Recovery (agents/runtime/recovery.py): each query reads only the runs it may take.
            models.Index(
                fields=["updated_at"],
                name="run_lease_due",
                condition=models.Q(
                    status__in=["running", "queued"], flag="", lease_expires_at__isnull=False
                ),
            ),
            models.Index(
                fields=["updated_at"],
                name="run_orphan_due",
                condition=models.Q(
                    status__in=["running", "queued"], flag="", lease_expires_at__isnull=True
                ),
            ),
            models.Index(
                fields=["updated_at"],
                name="run_wake_due",
                condition=models.Q(wake_requested=True, lease_expires_at__isnull=True),
            ),
            # Metrics: runs started in a window, counted by status (index-only scan).
            models.Index(fields=["created_at", "status"], name="run_created_status"),
            # Checkpoint retention (agents/runtime/retention.py) reads finished runs in this
            # order from where its last pass stopped.
            models.Index(
                fields=["finished_at", "id"],
                name="run_finished",
                condition=models.Q(finished_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.agent} run {str(self.id)[:8]} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL


class ApprovalRequest(models.Model):
    """A pending interrupt of a run, surfaced to people who may decide it."""

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        EDITED = "edited"
        REJECTED = "rejected"
        RESPONDED = "responded"
        EXPIRED = "expired"

    class Decision(models.TextChoices):
        APPROVE = "approve"
        EDIT = "edit"
        REJECT = "reject"
        RESPOND = "respond"

    class RejectReason(models.TextChoices):
        """Why a person rejected (optional); ``unsafe`` is severe: it would have caused harm."""

        WRONG_TARGET = "wrong_target", "Wrong target"
        WRONG_AMOUNT = "wrong_amount", "Wrong amount"
        NOT_NEEDED = "not_needed", "Not needed"
        UNSAFE = "unsafe", "Unsafe: would have caused harm"
        OTHER = "other", "Other"

    DECISION_STATUS = {
        Decision.APPROVE: Status.APPROVED,
        Decision.EDIT: Status.EDITED,
        Decision.REJECT: Status.REJECTED,
        Decision.RESPOND: Status.RESPONDED,
    }

    run = models.ForeignKey(AgentRun, on_delete=models.PROTECT, related_name="approvals")
    interrupt_id = models.CharField(max_length=64)
    # Position within a batched interrupt (one HITLRequest may ask for several actions).
    action_index = models.PositiveSmallIntegerField(default=0)
    tool = models.CharField(max_length=100, db_index=True)
    args = SealedJSONField(default=dict, run_attr="run_id")
    payload = SealedJSONField(default=dict, run_attr="run_id")
    payload_hash = models.CharField(max_length=64)
    tier = models.CharField(max_length=40, default="write", db_index=True)
    allowed_decisions = models.JSONField(default=list)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="decided_approvals",
    )
    decided_by_label = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    # Why a person rejected it (RejectReason; blank: not said, or not a rejection).
    reject_reason = models.CharField(max_length=12, choices=RejectReason.choices, blank=True)
    # The resume value handed to the graph: {"decision", "args"?, "message"?, "by"}.
    decision = SealedJSONField(default=dict, blank=True, run_attr="run_id")
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    # The policy version in force when the approval was requested (PolicyVersion.number).
    policy_version = models.PositiveIntegerField(default=0)
    # Quorum: votes count toward the current round; an edit that is not yet final starts a
    # new round for the edited args (see docs/policy.md).
    quorum_round = models.PositiveIntegerField(default=0)
    # The one effect key this approval authorized (set by the ledger on first use; invariant 11).
    spent_key = models.CharField(max_length=200, blank=True)
    # The agent's own args, kept once an edit vote replaced ``args`` before the decision.
    original_args = SealedJSONField(null=True, blank=True, run_attr="run_id")
    # Sweep bookkeeping: a due time is cleared once its step ran (indexed with status).
    remind_at = models.DateTimeField(null=True, blank=True)
    reminded_at = models.DateTimeField(null=True, blank=True)
    escalate_at = models.DateTimeField(null=True, blank=True)
    escalated_at = models.DateTimeField(null=True, blank=True)
    # What the request rested on, to tell the reviewer what changed while it waited
    # (approvals/changes.py); empty on approvals requested before these were kept.
    agent_version = models.CharField(max_length=40, blank=True)
    schema_digest = models.CharField(max_length=64, blank=True)
    policy_digest = models.CharField(max_length=64, blank=True)

    # Lists open their sealed values after one key query (core/sealed_query.py).
    objects = SealedQuerySet.as_manager()

    class Meta:
        ordering = ["expires_at", "id"]
        permissions = [("decide", "Can decide approvals")]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "interrupt_id", "action_index"], name="approval_unique_interrupt"
            ),
        ]
        indexes = [
            models.Index(fields=["status", "expires_at", "id"], name="approval_queue"),
            models.Index(fields=["status", "remind_at"], name="approval_remind_due"),
            models.Index(fields=["status", "escalate_at"], name="approval_escalate_due"),
            # Metrics (console/metrics/): requests in a window, decisions per day, queue age.
            models.Index(fields=["created_at"], name="approval_created"),
            models.Index(fields=["decided_at"], name="approval_decided"),
            models.Index(fields=["status", "created_at"], name="approval_status_created"),
            # The oldest pending approval of a tier: one index read (/metrics, stuck queues).
            models.Index(
                fields=["tier", "created_at"],
                name="approval_pending_tier_age",
                condition=models.Q(status="pending"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool} for run {str(self.run_id)[:8]} ({self.status})"

    @property
    def is_pending(self) -> bool:
        return self.status == self.Status.PENDING

    @property
    def proposed_args(self) -> dict:
        """The args the agent proposed (before any edit vote)."""
        return self.args if self.original_args is None else self.original_args


class ApprovalVote(models.Model):
    """One person's vote toward an approval's quorum (one per person and round)."""

    approval = models.ForeignKey(ApprovalRequest, on_delete=models.PROTECT, related_name="votes")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="approval_votes"
    )
    round = models.PositiveIntegerField(default=0)
    decision = models.CharField(max_length=10, choices=ApprovalRequest.Decision.choices)
    args = SealedJSONField(default=dict, run_attr="approval.run_id")
    args_hash = models.CharField(max_length=64)
    message = SealedTextField(blank=True, run_attr="approval.run_id")
    created_at = models.DateTimeField(auto_now_add=True)

    # Lists open their sealed values after one key query (core/sealed_query.py).
    objects = SealedQuerySet.as_manager()

    class Meta:
        ordering = ["approval", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["approval", "user", "round"], name="vote_once_per_round"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.decision} #{self.approval_id} (round {self.round})"


from approvals.autonomy_models import (  # noqa: E402, F401
    AutonomousAction,
    AutonomyRule,
    ShadowVerdict,
)
from approvals.canary_models import Canary, CanaryPlan  # noqa: E402, F401
from approvals.link_models import DecisionLink, SlackIdentity  # noqa: E402, F401
from approvals.outcome_models import ApprovalOutcome  # noqa: E402, F401
from approvals.policy_models import (  # noqa: E402, F401
    PolicyVersion,
    RiskTier,
    ToolPolicy,
    ToolPolicyRule,
)
from approvals.rollup_models import MetricsBucket, MetricsCount  # noqa: E402, F401
