"""Runs and the approvals they wait on."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


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
    input = models.JSONField(default=dict)
    output = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    # Set when the runner refuses to resume (e.g. the pending node no longer exists).
    flag = models.CharField(max_length=200, blank=True)
    resume_count = models.PositiveIntegerField(default=0)
    failure_count = models.PositiveIntegerField(default=0)
    steps_used = models.PositiveIntegerField(default=0)
    tokens_used = models.PositiveIntegerField(default=0)
    cancel_requested = models.BooleanField(default=False)
    # Set on a run forked from another run's checkpoint ("fork from here").
    parent_run = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks"
    )
    forked_from_checkpoint = models.CharField(max_length=64, blank=True)
    lease_owner = models.CharField(max_length=100, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "-created_at"], name="run_status_created"),
            models.Index(fields=["status", "lease_expires_at"], name="run_status_lease"),
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
    args = models.JSONField(default=dict)
    payload = models.JSONField(default=dict)
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
    # The resume value handed to the graph: {"decision", "args"?, "message"?, "by"}.
    decision = models.JSONField(default=dict, blank=True)
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

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
        ]

    def __str__(self) -> str:
        return f"{self.tool} for run {str(self.run_id)[:8]} ({self.status})"

    @property
    def is_pending(self) -> bool:
        return self.status == self.Status.PENDING
