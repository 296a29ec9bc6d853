"""A LangGraph Agent Server deployment the console watches for interrupted threads
(``agents.remote.connector``), and the record that each decided request was resumed once."""

from __future__ import annotations

from django.db import models

from agents.remote.models import ExternalAgent, RemoteRequest


class AgentServerConnector(models.Model):
    """An Agent Server deployment whose interrupted threads become approval requests of
    ``agent``; decided ones are resumed with ``runs.create(command={"resume": ...})``."""

    name = models.CharField(max_length=100, unique=True)
    url = models.URLField(max_length=500, help_text="The deployment's URL (its API root).")
    graph_ids = models.JSONField(
        default=list,
        help_text="Graph ids (or assistant ids) whose interrupted threads to watch (a JSON list).",
    )
    # Sent as x-api-key; never shown back, never audited.
    api_key = models.CharField(max_length=300, blank=True)
    # One deployment per agent: (agent, thread_id, interrupt_id) must name one thread.
    agent = models.OneToOneField(
        ExternalAgent,
        on_delete=models.PROTECT,
        related_name="connector",
        help_text="Its requests, runs, owner group and tool list are this agent's.",
    )
    is_active = models.BooleanField(default=True)
    max_threads = models.PositiveIntegerField(
        default=50,
        help_text="At most this many new interrupted threads are opened per graph and poll.",
    )
    # Per graph id, where the next poll reads the interrupted threads from (0: the oldest).
    poll_offsets = models.JSONField(default=dict, blank=True, editable=False)
    last_polled_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_error = models.TextField(blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ConnectorResume(models.Model):
    """One decided request's resume on the Agent Server. Created (the claim) before the call,
    ``delivered`` after it; a claim left ``sending`` by a crash is settled on a later poll by
    whether the thread still has the interrupt pending."""

    class Status(models.TextChoices):
        SENDING = "sending"
        DELIVERED = "delivered"
        FAILED = "failed"

    remote = models.OneToOneField(
        RemoteRequest, on_delete=models.CASCADE, primary_key=True, related_name="connector_resume"
    )
    connector = models.ForeignKey(
        AgentServerConnector, on_delete=models.CASCADE, related_name="resumes"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.SENDING)
    attempts = models.PositiveIntegerField(default=1)
    server_run_id = models.CharField(max_length=100, blank=True)
    last_error = models.TextField(blank=True)
    claimed_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["connector", "status"], name="connector_resume_status")]

    def __str__(self) -> str:
        return f"{self.remote_id} ({self.status})"
