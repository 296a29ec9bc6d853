"""Outbox rows for many events at once (the sweep's chunks): one INSERT and one delivery task.

The rows are the ones ``notifications.notifications_create`` writes for each event, with the
same subject, text, payload, recipients and decision links; the recipients are read once per
(tier, event) in a pass (``Recipients``) instead of once per approval, and the requester is
left out here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import timezone

from approvals.links import decision_links_create
from approvals.models import ApprovalRequest, Notification, RiskTier
from approvals.notification_text import (
    Recipient,
    by_address,
    message_payload,
    message_text,
    requester_recipients,
)
from approvals.notifications import notifications_deliver_enqueue

Event = Notification.Event


class Recipients:
    """The people an event goes to, by tier: each group's members read once per pass."""

    def __init__(self) -> None:
        self._members: dict[tuple[Any, ...], list[tuple[int, str]]] = {}

    def users(self, *, approval: ApprovalRequest, tier: RiskTier, event: str) -> list[Recipient]:
        """As ``notification_text.recipients``: the requester for an expiry or a decision, the
        escalation group for an escalation, else the approver groups (and the escalation group
        once escalated); never the requester in a group, never an inactive or blank address."""
        if event in (Event.EXPIRY, Event.DECISION):
            return requester_recipients(approval)
        escalation = bool(tier.escalation_group_id)
        if event == Event.ESCALATION:
            if not escalation:
                return []
            key: tuple[Any, ...] = (tier.pk, "escalation")
        else:
            with_escalation = event == Event.REMINDER and bool(approval.escalated_at) and escalation
            key = (tier.pk, "approvers", with_escalation)
        if key not in self._members:  # the query is built only when it is run
            self._members[key] = self._read(tier, key)
        return by_address(self._members[key], exclude_user_id=approval.run.requested_by_id)

    @staticmethod
    def _read(tier: RiskTier, key: tuple[Any, ...]) -> list[tuple[int, str]]:
        """The active members with an address of the groups ``key`` names."""
        if key[1] == "escalation":
            groups = Q(groups=tier.escalation_group_id)
        else:
            approvers = RiskTier.approver_groups.through.objects.filter(risktier_id=tier.pk)
            groups = Q(groups__in=approvers.values("group_id"))
            if key[2]:  # with the escalation group
                groups |= Q(groups=tier.escalation_group_id)
        users = get_user_model().objects.filter(groups, is_active=True).exclude(email="")
        return list(users.values_list("pk", "email"))


def notifications_create_many(
    items: Iterable[tuple[ApprovalRequest, str, RiskTier | None, str]],
    *,
    recipients: Recipients | None = None,
) -> list[Notification]:
    """Outbox rows for each (approval, event, tier, detail), in the caller's transaction: one
    INSERT, and one delivery task for them all on commit. A tier without a row sends nothing."""
    recipients = recipients or Recipients()
    now = timezone.now()
    rows: list[tuple[Notification, int | None]] = []
    for approval, event, tier, detail in items:
        if tier is None:
            continue
        subject, text = message_text(approval=approval, event=event, detail=detail)
        payload = message_payload(approval=approval, event=event, text=text)
        common = {
            "event": event,
            "subject": subject,
            "text": text,
            "payload": payload,
            "approval": approval,
            "next_attempt_at": now,
        }
        if tier.email_notifications:
            for email, user_id in recipients.users(approval=approval, tier=tier, event=event):
                row = Notification(channel=Notification.Channel.EMAIL, recipient=email, **common)
                rows.append((row, user_id))
        endpoint = tier.webhook_endpoint
        if endpoint is not None and endpoint.is_active:
            row = Notification(
                channel=Notification.Channel.WEBHOOK,
                recipient=endpoint.url,
                endpoint=endpoint,
                **common,
            )
            rows.append((row, None))
    if rows:
        Notification.objects.bulk_create([row for row, _ in rows])  # both databases return ids
        decision_links_create(rows)
        notifications_deliver_enqueue(notification_ids=[row.pk for row, _ in rows])
    return [row for row, _ in rows]
