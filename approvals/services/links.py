"""Deciding from a signed e-mail link (approvals/links.py makes and reads the tokens).

Opening a link checks it and decides nothing (a GET: link scanners prefetch); deciding claims
the link with a conditional update and decides in the same transaction, so a refused decision
rolls the claim back and the link stays usable (invariant 5 holds through approval_decide).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals.links import LinkUnreadable, decision_link_read
from approvals.models import ApprovalRequest, DecisionLink
from approvals.permissions import user_may_decide
from approvals.services.decisions import approval_decide
from approvals.services.errors import DecisionInvalid
from core.errors import ApplicationError

# A link decides yes or no; an edit or a response is made on the approval's page.
LINK_DECISIONS = (ApprovalRequest.Decision.APPROVE, ApprovalRequest.Decision.REJECT)


class LinkRefused(ApplicationError):
    """A link that decides nothing now; ``reason`` names why, ``approval_id`` where to look."""

    reason = "invalid"

    def __init__(self, message: str, *, approval_id: int | None = None):
        super().__init__(message)
        self.approval_id = approval_id

    def extra(self) -> dict[str, Any]:
        return {"reason": self.reason}


class LinkInvalid(LinkRefused):
    status_code = 404
    reason = "invalid"


class LinkForwarded(LinkRefused):
    status_code = 403
    reason = "forwarded"


class LinkNotAllowed(LinkRefused):
    status_code = 403
    reason = "not_allowed"


class LinkUsed(LinkRefused):
    status_code = 409
    reason = "used"


class LinkExpired(LinkRefused):
    status_code = 410
    reason = "expired"


class LinkStale(LinkRefused):
    status_code = 409
    reason = "changed"


def decision_link_open(*, token: str, user: Any) -> DecisionLink:
    """The link ``token`` names, if it may still decide for ``user``; else a LinkRefused
    saying why (never anything personal to someone the link was not sent to)."""
    try:
        link = decision_link_read(token)
    except LinkUnreadable:
        raise LinkInvalid(
            "This link is not valid: it was altered, cut short, or replaced by a newer e-mail."
        ) from None
    approval = link.approval
    if link.recipient_id != user.pk:
        raise LinkForwarded(
            "This link was sent to someone else: it decides nothing for you. Open the approval "
            "in the console, where your own rights apply.",
            approval_id=approval.pk,
        )
    # The recipient may have lost the right meanwhile (left the group): then the link shows
    # nothing of the approval either (its page would 404), and works again if it comes back.
    allowed, reason = user_may_decide(user=user, approval=approval)
    if not allowed:
        raise LinkNotAllowed(
            f"This link decides nothing for you now: {reason}", approval_id=approval.pk
        )
    if link.used_at is not None:
        when = timezone.localtime(link.used_at).strftime("%Y-%m-%d %H:%M")
        raise LinkUsed(f"This link was already used, at {when}.", approval_id=approval.pk)
    now = timezone.now()
    if (
        approval.status == ApprovalRequest.Status.EXPIRED
        or min(link.expires_at, approval.expires_at) <= now
    ):
        raise LinkExpired(
            "This link has expired with its approval: nothing was decided.",
            approval_id=approval.pk,
        )
    if not approval.is_pending:
        by = approval.decided_by_label or "someone"
        raise LinkUsed(
            f"This approval was already {approval.status} by {by}.", approval_id=approval.pk
        )
    if approval.payload_hash != link.payload_hash:
        raise LinkStale(
            "The action changed since this e-mail was sent: review it again on its page.",
            approval_id=approval.pk,
        )
    return link


def decision_link_decide(
    *,
    token: str,
    user: Any,
    decision: str,
    message: str = "",
    changes_seen: str | None = None,
    request: Any = None,
) -> ApprovalRequest:
    """Decide with a link: claim it (once) and vote, in one transaction; refusals of
    approval_decide (no longer allowed, decided meanwhile, changes not confirmed, ...) leave
    the link unused."""
    link = decision_link_open(token=token, user=user)
    if decision not in LINK_DECISIONS:
        raise DecisionInvalid(
            "A link approves or rejects; edit or respond on the approval's page.",
            errors={"decision": "must be approve or reject"},
        )
    with transaction.atomic():
        claimed = DecisionLink.objects.filter(
            pk=link.pk, used_at__isnull=True, nonce_hash=link.nonce_hash
        ).update(used_at=timezone.now(), used_by=user, decision=decision)
        if not claimed:
            raise LinkUsed("This link was already used.", approval_id=link.approval_id)
        return approval_decide(
            approval=link.approval,
            user=user,
            decision=decision,
            seen_hash=link.payload_hash,
            message=message,
            request=request,
            via="link",
            changes_seen=changes_seen,
        )
