"""Signed "Review and approve" links: made when an approver's e-mail is sent, checked when it is
opened (approvals/services/links.py decides with one). See docs/security.md.

A token is Django's ``signing`` (HMAC-SHA256 under SECRET_KEY, a salt of its own) over the
link's row id, its approval, its recipient and a random nonce; the row binds the payload hash
and the expiry, and keeps only the nonce's hash. A token whose row, approval, recipient or nonce
differs is not valid, whoever holds it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable

from django.conf import settings
from django.core import signing
from django.urls import reverse
from django.utils import timezone

from approvals.models import DecisionLink, Notification
from approvals.notification_text import DECIDING_EVENTS

SALT = "approvals.decision-link"


class LinkUnreadable(Exception):
    """A token that was altered, cut short or made for another link."""


def nonce_hash(nonce: str) -> str:
    return hashlib.sha256(nonce.encode()).hexdigest()


def decision_links_create(rows: Iterable[tuple[Notification, int | None]]) -> list[DecisionLink]:
    """A link row for each e-mail (saved) asking one approver to decide; no token yet."""
    links = [
        DecisionLink(
            approval=row.approval,
            recipient_id=user_id,
            notification=row,
            payload_hash=row.approval.payload_hash,
            expires_at=row.approval.expires_at,
        )
        for row, user_id in rows
        if user_id is not None
        and row.channel == Notification.Channel.EMAIL
        and row.event in DECIDING_EVENTS
    ]
    return DecisionLink.objects.bulk_create(links) if links else []


def decision_link_token_make(*, link: DecisionLink) -> str | None:
    """A fresh token for ``link`` (its previous one stops working), or None when the link can no
    longer decide anything (used, expired, or the approval decided or changed meanwhile)."""
    approval = link.approval
    if (
        not approval.is_pending
        or approval.payload_hash != link.payload_hash
        or link.expires_at <= timezone.now()
    ):
        return None
    nonce = secrets.token_urlsafe(16)
    made = DecisionLink.objects.filter(pk=link.pk, used_at__isnull=True).update(
        nonce_hash=nonce_hash(nonce)
    )
    if not made:
        return None
    value = {"l": link.pk, "a": link.approval_id, "u": link.recipient_id, "n": nonce}
    return signing.dumps(value, salt=SALT)


def decision_link_url(token: str) -> str:
    path = reverse("approvals:decision-link", kwargs={"token": token})
    return f"{settings.CONSOLE_BASE_URL.rstrip('/')}{path}"


def decision_link_read(token: str) -> DecisionLink:
    """The link a token names, with its approval; LinkUnreadable for anything else."""
    try:
        value = signing.loads(token, salt=SALT)
        link_id, approval_id, user_id, nonce = (value[k] for k in ("l", "a", "u", "n"))
    except (signing.BadSignature, TypeError, KeyError, ValueError):
        raise LinkUnreadable from None
    link = (
        DecisionLink.objects.select_related("approval", "approval__run", "recipient", "used_by")
        .filter(pk=link_id, approval_id=approval_id, recipient_id=user_id)
        .first()
    )
    if (
        link is None
        or not isinstance(nonce, str)
        or not link.nonce_hash
        or not hmac.compare_digest(link.nonce_hash, nonce_hash(nonce))
    ):
        raise LinkUnreadable
    return link


def decision_link_text(row: Notification) -> str:
    """The e-mail's closing lines with a fresh link, or "" when it has none (any more)."""
    link = DecisionLink.objects.select_related("approval").filter(notification=row).first()
    token = decision_link_token_make(link=link) if link is not None else None
    if token is None:
        return ""
    return (
        f"\n\nReview and approve: {decision_link_url(token)}\n"
        "This link is yours alone: it works once, signed in as you, until the approval expires."
    )
