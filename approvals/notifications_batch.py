"""Outbox rows for many events at once (the sweep's chunks): one INSERT and one delivery task.

The rows are the ones ``notifications.notifications_create`` writes for each event, with the
same subject, text, payload and recipients; the recipients are read once per (tier, event)
in a pass (``Recipients``) instead of once per approval, and the requester is left out here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import timezone

from approvals.models import ApprovalRequest, Notification, RiskTier
from approvals.notifications import _text, message_payload, notifications_deliver_enqueue

Event = Notification.Event


class Recipients:
    """The addresses an event goes to, by tier: each group's members read once per pass."""

    def __init__(self) -> None:
        self._members: dict[tuple[Any, ...], list[tuple[int, str]]] = {}

    def emails(self, *, approval: ApprovalRequest, tier: RiskTier, event: str) -> list[str]:
        """As ``notifications._recipients``: the requester for an expiry or a decision, the
        escalation group for an escalation, else the approver groups (and the escalation group
        once escalated); never the requester in a group, never an inactive or blank address."""
        if event in (Event.EXPIRY, Event.DECISION):
            email = approval.run.requested_by.email
            return [email] if email else []
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
        requester = approval.run.requested_by_id
        return sorted({email for pk, email in self._members[key] if pk != requester})

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
    rows: list[Notification] = []
    for approval, event, tier, detail in items:
        if tier is None:
            continue
        subject, text = _text(approval=approval, event=event, detail=detail)
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
            for email in recipients.emails(approval=approval, tier=tier, event=event):
                rows.append(
                    Notification(channel=Notification.Channel.EMAIL, recipient=email, **common)
                )
        endpoint = tier.webhook_endpoint
        if endpoint is not None and endpoint.is_active:
            rows.append(
                Notification(
                    channel=Notification.Channel.WEBHOOK,
                    recipient=endpoint.url,
                    endpoint=endpoint,
                    **common,
                )
            )
    if rows:
        Notification.objects.bulk_create(rows)  # both databases return the ids
        notifications_deliver_enqueue(notification_ids=[row.pk for row in rows])
    return rows
