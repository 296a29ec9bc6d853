"""Signed decision links (in approvers' e-mails) and the Slack people who may press a button."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class DecisionLink(models.Model):
    """One "Review and approve" link of one e-mail: for one approver, one approval and one
    version of its action (payload hash), until the approval expires, used once.

    The token is never stored: it is made when the e-mail is sent (approvals/links.py) and only
    the hash of its random part is kept; a later attempt of the same e-mail makes a new one.
    """

    approval = models.ForeignKey(
        "approvals.ApprovalRequest", on_delete=models.CASCADE, related_name="decision_links"
    )
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="decision_links"
    )
    notification = models.OneToOneField(
        "approvals.Notification",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="decision_link",
    )
    payload_hash = models.CharField(max_length=64)
    expires_at = models.DateTimeField()
    # SHA-256 (hex) of the token's random part; empty until the e-mail is sent.
    nonce_hash = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    decision = models.CharField(max_length=10, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(used_at__isnull=True) | models.Q(used_by__isnull=False),
                name="decision_link_used_by",
            ),
        ]

    def __str__(self) -> str:
        return f"link #{self.pk} for {self.recipient} on approval #{self.approval_id}"


class SlackIdentity(models.Model):
    """Who a Slack user is in the console: their button presses decide as this user."""

    team_id = models.CharField(max_length=32, help_text="The Slack workspace id (T…).")
    slack_user_id = models.CharField(max_length=32, help_text="The Slack member id (U… or W…).")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="slack_identities"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team_id", "slack_user_id"]
        verbose_name_plural = "Slack identities"
        constraints = [
            models.UniqueConstraint(
                fields=["team_id", "slack_user_id"], name="slack_identity_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team_id}/{self.slack_user_id} → {self.user}"
