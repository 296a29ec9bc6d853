"""The notification outbox's rows and the webhook endpoints they are sent to."""

from __future__ import annotations

import base64
import secrets
import uuid

from django.db import models


def webhook_secret_new() -> str:
    """A Standard Webhooks secret: ``whsec_`` + base64 of 32 random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


class WebhookEndpoint(models.Model):
    """Where a tier's notifications are POSTed, and the secret that signs them."""

    class Kind(models.TextChoices):
        STANDARD = "standard", "Standard (signed JSON)"
        SLACK = "slack", "Slack (Block Kit message with buttons)"

    name = models.CharField(max_length=100, unique=True)
    url = models.URLField(max_length=500, help_text="Receives a signed JSON POST per event.")
    secret = models.CharField(
        max_length=100,
        default=webhook_secret_new,
        help_text="Signs every request (Standard Webhooks, HMAC-SHA256); give it to the receiver.",
    )
    is_active = models.BooleanField(default=True, help_text="Off: nothing is sent to it.")
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.STANDARD)
    # Slack's app signing secret: verifies the button presses Slack sends back
    # (approvals/slack.py). Set in the admin, never shown in lists or audit events.
    slack_signing_secret = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Notification(models.Model):
    """Outbox: written with the event, delivered by a task with retries and backoff."""

    class Channel(models.TextChoices):
        EMAIL = "email"
        WEBHOOK = "webhook"

    class Status(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        FAILED = "failed"

    class Event(models.TextChoices):
        REQUEST = "request"
        REMINDER = "reminder"
        ESCALATION = "escalation"
        EXPIRY = "expiry"
        DECISION = "decision"
        STUCK = "stuck"
        # An external agent's decided request, POSTed to its callback URL (agents/remote/).
        CALLBACK = "callback"

    event = models.CharField(max_length=12, choices=Event.choices)
    channel = models.CharField(max_length=8, choices=Channel.choices)
    recipient = models.CharField(max_length=500, help_text="Email address or webhook URL.")
    endpoint = models.ForeignKey(
        WebhookEndpoint,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="notifications",
        help_text="Webhook only: its secret signs every attempt.",
    )
    # The webhook-id header: the same for every retry, so a receiver can drop duplicates.
    message_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    subject = models.CharField(max_length=200)
    text = models.TextField()
    payload = models.JSONField(default=dict, blank=True)
    approval = models.ForeignKey(
        "approvals.ApprovalRequest",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="notifications",
    )
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    last_error = models.TextField(blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="notification_due"),
        ]

    def __str__(self) -> str:
        return f"{self.event} via {self.channel} to {self.recipient} ({self.status})"
