"""What a notification says and to whom: its subject and text, the JSON a webhook receives,
and the people an e-mail goes to (shared by ``notifications`` and ``notifications_batch``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Q

from approvals.models import ApprovalRequest, Notification, RiskTier

Event = Notification.Event
# (address, user id): the user a signed decision link is made for, or None where the address
# is not one approver's (the requester's notices, or an address several people share).
Recipient = tuple[str, int | None]
# The events that ask approvers to decide: their e-mails carry a signed "Review and approve" link.
DECIDING_EVENTS = (Event.REQUEST, Event.REMINDER, Event.ESCALATION)


def approval_url(approval: ApprovalRequest) -> str:
    return f"{settings.CONSOLE_BASE_URL.rstrip('/')}/approvals/{approval.pk}/"


def message_text(*, approval: ApprovalRequest, event: str, detail: str) -> tuple[str, str]:
    """(subject, Slack-compatible text) for one event."""
    what = f"{approval.tool} ({approval.tier}) for run {str(approval.run_id)[:8]}"
    subject = {
        Event.REQUEST: f"Approval needed: {what}",
        Event.REMINDER: f"Reminder: approval of {what} expires soon",
        Event.ESCALATION: f"Escalated: approval of {what}",
        Event.EXPIRY: f"Expired: approval of {what}",
        Event.DECISION: f"Decided: approval of {what}",
    }[event]
    text = (
        f"{subject}. {detail}".strip()
        + f"\n<{approval_url(approval)}|Open approval #{approval.pk}>"
    )
    return subject[:200], text


def message_payload(*, approval: ApprovalRequest, event: str, text: str) -> dict[str, Any]:
    """The JSON a webhook receives for one event of one approval (and the e-mail's record).

    ``payload_hash`` is the version of the action the message describes: a Slack button binds
    it, so a click on a message about an action that changed since decides nothing."""
    return {
        "text": text,
        "event": event,
        "approval_id": approval.pk,
        "run_id": str(approval.run_id),
        "tool": approval.tool,
        "tier": approval.tier,
        "status": approval.status,
        "expires_at": approval.expires_at.isoformat(),
        "url": approval_url(approval),
        "payload_hash": approval.payload_hash,
    }


def by_address(
    members: Iterable[tuple[int, str]], *, exclude_user_id: int | None
) -> list[Recipient]:
    """One recipient per address (sorted), with its user when exactly one member has it."""
    users: dict[str, set[int]] = {}
    for pk, email in members:
        if pk != exclude_user_id:
            users.setdefault(email, set()).add(pk)
    return [
        (email, next(iter(pks)) if len(pks) == 1 else None) for email, pks in sorted(users.items())
    ]


def _members(groups: Q | None) -> list[tuple[int, str]]:
    """The active members with an address of the groups ``groups`` matches."""
    if groups is None:
        return []
    users = get_user_model().objects.filter(groups, is_active=True).exclude(email="")
    return list(users.values_list("pk", "email"))


def requester_recipients(approval: ApprovalRequest) -> list[Recipient]:
    """An expiry or a decision goes to the requester (no link: they decide nothing)."""
    email = approval.run.requested_by.email
    return [(email, None)] if email else []


def recipients(*, approval: ApprovalRequest, tier: RiskTier, event: str) -> list[Recipient]:
    """The requester for an expiry or a decision, the escalation group for an escalation, else
    the approver groups (and the escalation group once escalated); never the requester in a
    group, never an inactive member or a blank address."""
    if event in (Event.EXPIRY, Event.DECISION):
        return requester_recipients(approval)
    requester_id = approval.run.requested_by_id
    if event == Event.ESCALATION:
        escalation = Q(groups=tier.escalation_group_id) if tier.escalation_group_id else None
        return by_address(_members(escalation), exclude_user_id=requester_id)
    # The tier's approver groups as a subquery: the addresses in one round trip.
    approvers = RiskTier.approver_groups.through.objects.filter(risktier_id=tier.pk)
    groups = Q(groups__in=approvers.values("group_id"))
    if event == Event.REMINDER and approval.escalated_at and tier.escalation_group_id:
        groups |= Q(groups=tier.escalation_group_id)
    return by_address(_members(groups), exclude_user_id=requester_id)
