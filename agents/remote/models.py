"""External agents, their keys, and the approval requests they open (agents/remote/)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.validators import validate_slug
from django.db import models

from approvals.contract import EXTERNAL_AGENT_PREFIX
from approvals.models import webhook_secret_new
from core.sealed_fields import SealedJSONField
from core.sealed_query import SealedQuerySet


class ExternalAgent(models.Model):
    """An agent that runs in its own service and asks the console before risky calls."""

    name = models.CharField(
        max_length=60,
        unique=True,
        validators=[validate_slug],
        help_text='Its runs are runs of agent "external:<name>".',
    )
    owner_group = models.ForeignKey(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Its members see the agent's runs as a requester does.",
    )
    # The runs' requester (never a person, so four eyes holds): made with the agent.
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name="external_agent",
        editable=False,
    )
    tools = models.JSONField(
        default=list,
        blank=True,
        help_text="Tool names it may ask about (a JSON list); empty: any tool.",
    )
    callback_url = models.URLField(
        max_length=500,
        blank=True,
        help_text="Receives the signed decision; a request may name another path on this origin.",
    )
    # Signs the callbacks (Standard Webhooks); kept in sync with its endpoint's secret.
    callback_secret = models.CharField(max_length=100, default=webhook_secret_new, editable=False)
    # The outbox endpoint its callbacks go through (retries, failed state in the admin).
    endpoint = models.OneToOneField(
        "approvals.WebhookEndpoint",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="external_agent",
        editable=False,
    )
    is_active = models.BooleanField(default=True, help_text="Off: its keys are refused (401).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.run_agent

    @property
    def run_agent(self) -> str:
        """The ``AgentRun.agent`` of its runs."""
        return f"{EXTERNAL_AGENT_PREFIX}{self.name}"

    def tool_allowed(self, tool: str) -> bool:
        return not self.tools or tool in self.tools


class ExternalAgentKey(models.Model):
    """One credential of an agent: only its SHA-256 is kept (shown once when issued)."""

    agent = models.ForeignKey(ExternalAgent, on_delete=models.CASCADE, related_name="keys")
    prefix = models.CharField(max_length=12, help_text="The key's first characters.")
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        state = " (revoked)" if self.revoked_at else ""
        return f"{self.prefix}…{state}"


class RemoteRequest(models.Model):
    """One interrupt an external agent asked about: (agent, thread, interrupt) is its
    idempotency key; its approvals are those of ``run`` with its ``approval_interrupt_id``."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DECIDED = "decided"
        CANCELLED = "cancelled"

    class Protocol(models.TextChoices):
        CONSOLE = "console"
        LANGCHAIN_HITL = "langchain.hitl"
        TOOL_APPROVAL = "tool_approval"
        AGENT_INBOX = "agent_inbox"
        OTHER = "other"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey(ExternalAgent, on_delete=models.PROTECT, related_name="requests")
    run = models.ForeignKey(
        "approvals.AgentRun", on_delete=models.PROTECT, related_name="remote_requests"
    )
    thread_id = models.CharField(max_length=200)
    interrupt_id = models.CharField(max_length=200)
    # ApprovalRequest.interrupt_id holds 64 characters: a longer id is hashed there.
    approval_interrupt_id = models.CharField(max_length=64)
    value = SealedJSONField(run_attr="run_id")
    value_hash = models.CharField(max_length=64)
    protocol = models.CharField(max_length=16, choices=Protocol.choices)
    callback_url = models.URLField(max_length=500, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    resume = SealedJSONField(null=True, blank=True, run_attr="run_id")
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = SealedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "thread_id", "interrupt_id"], name="remote_request_once"
            ),
        ]
        indexes = [
            models.Index(fields=["run", "status"], name="remote_request_run_status"),
            models.Index(fields=["agent", "thread_id"], name="remote_request_thread"),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}/{self.interrupt_id} ({self.status})"
