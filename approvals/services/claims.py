"""Claims and assignments of pending approvals: a soft lock that tells others who is on it.

A claim never blocks a decision (the decision service only notes it: ``claim_note``). Who may
claim: whoever may decide the approval. Who may assign: an admin or a member of the tier's
lead group, to someone who may decide it. An assignment replaces any claim and does not lapse
(it was someone's decision; it ends when the assignee releases it or it is unassigned); a claim
lapses after APPROVAL_CLAIM_SECONDS, and a lapsed claim is a free approval (no event: it is a
time, not a change). Every change is audited in its transaction: approval.claimed,
approval.released, approval.assigned, approval.unassigned.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone

from approvals.models import ApprovalClaim, ApprovalRequest
from approvals.permissions import user_may_assign, user_may_decide
from audit.services import event_record
from core.errors import ApplicationError


class ClaimError(ApplicationError):
    """A claim or assignment that was not made (400 unless a subclass says otherwise)."""


class ClaimInvalid(ClaimError):
    """Bad input (400); ``errors`` names the field (``user``)."""


class ClaimForbidden(ClaimError):
    status_code = 403


class ClaimConflict(ClaimError):
    """The approval is decided or expired, or someone else holds it (409)."""

    status_code = 409


def claim_text(claim: ApprovalClaim) -> str:
    """How the claim reads to others: "bob is looking at this since 08:01"."""
    if claim.is_assignment:
        at = timezone.localtime(claim.since).strftime("%H:%M")
        return (
            f"assigned to {claim.user.get_username()} by {claim.assigned_by.get_username()} at {at}"
        )
    since = timezone.localtime(claim.since).strftime("%H:%M")
    return f"{claim.user.get_username()} is looking at this since {since}"


def _live(now: dt.datetime) -> Q:
    return Q(until__isnull=True) | Q(until__gt=now)


def _pending_check(approval: ApprovalRequest, now: dt.datetime) -> None:
    """Claims on a decided or expired approval mean nothing: 409, read in this transaction."""
    row = ApprovalRequest.objects.filter(pk=approval.pk).values("status", "expires_at").get()
    if row["status"] != ApprovalRequest.Status.PENDING:
        raise ClaimConflict(f"This approval is already {row['status']}: nobody can claim it now.")
    if row["expires_at"] <= now:
        raise ClaimConflict("This approval has expired: nobody can claim it now.")


def _held_elsewhere(approval: ApprovalRequest, user: Any, now: dt.datetime) -> ClaimConflict:
    holder = (
        ApprovalClaim.objects.select_related("user", "assigned_by")
        .filter(_live(now), approval=approval)
        .exclude(user=user)
        .first()
    )
    text = claim_text(holder) if holder else "someone else holds it"
    return ClaimConflict(f"Not claimed: {text}. You may still decide it.")


def _take_if_free(
    *, approval: ApprovalRequest, user: Any, now: dt.datetime, until: dt.datetime
) -> int:
    """The conditional write: take the row if its claim lapsed or is this user's (a renewal
    keeps ``since``). Rows updated (0: no row, or someone else's live claim or assignment)."""
    mine = Q(user=user, assigned_by__isnull=True)
    return (
        ApprovalClaim.objects.filter(approval=approval)
        .filter(Q(until__lte=now) | mine)
        .update(
            user=user,
            since=Case(When(mine & Q(until__gt=now), then=F("since")), default=Value(now)),
            until=until,
            assigned_by=None,
        )
    )


def _insert_if_none(
    *, approval: ApprovalRequest, user: Any, now: dt.datetime, until: dt.datetime
) -> bool:
    """The first claim: one insert on the unique approval column. False if a row exists
    (another reviewer's insert won, even one committed a moment ago)."""
    try:
        with transaction.atomic():
            ApprovalClaim.objects.create(approval=approval, user=user, since=now, until=until)
    except IntegrityError:
        return False
    return True


def approval_claim(*, approval: ApprovalRequest, user: Any, request: Any = None) -> ApprovalClaim:
    """Claim (or renew one's claim on) a pending approval for APPROVAL_CLAIM_SECONDS.

    403 for someone who may not decide it; 409 when it is no longer pending or someone else
    holds a live claim or assignment. An approval assigned to ``user`` stays assigned.
    """
    allowed, reason = user_may_decide(user=user, approval=approval)
    if not allowed:
        raise ClaimForbidden(f"Only someone who may decide this approval may claim it. {reason}")
    now = timezone.now()
    until = now + dt.timedelta(seconds=settings.APPROVAL_CLAIM_SECONDS)
    with transaction.atomic():
        _pending_check(approval, now)
        assigned = ApprovalClaim.objects.filter(
            approval=approval, user=user, assigned_by__isnull=False
        ).first()
        if assigned is not None:
            return assigned  # already theirs, with no lapse: nothing changes
        taken = _take_if_free(approval=approval, user=user, now=now, until=until)
        if not taken and not _insert_if_none(approval=approval, user=user, now=now, until=until):
            raise _held_elsewhere(approval, user, now)
        claim = ApprovalClaim.objects.select_related("user").get(approval=approval)
        event_record(
            action="approval.claimed",
            actor=user,
            run_id=approval.run_id,
            approval_id=approval.pk,
            tool=approval.tool,
            data={
                "user": user.get_username(),
                "until": until.isoformat(),
                "renewed": claim.since != now,
            },
            request=request,
        )
    return claim


def approval_claim_release(*, approval: ApprovalRequest, user: Any, request: Any = None) -> None:
    """Give up one's claim, or hand back an assignment. 409 if ``user`` holds none."""
    now = timezone.now()
    with transaction.atomic():
        _pending_check(approval, now)
        claim = (
            ApprovalClaim.objects.select_for_update()
            .filter(_live(now), approval=approval, user=user)
            .first()
        )
        if claim is None:
            raise ClaimConflict("You hold no claim on this approval.")
        claim.delete()
        data: dict[str, Any] = {"user": user.get_username(), "until": None}
        if claim.is_assignment:
            data["assigned_by"] = claim.assigned_by.get_username()
        else:
            data["until"] = claim.until.isoformat()
        event_record(
            action="approval.released",
            actor=user,
            run_id=approval.run_id,
            approval_id=approval.pk,
            tool=approval.tool,
            data=data,
            request=request,
        )


def _assignee(username: Any, approval: ApprovalRequest) -> Any:
    """The user named ``username`` if they may decide the approval; 400 naming why not."""
    name = str(username or "").strip()
    if not name:
        raise ClaimInvalid(
            "Name the reviewer to assign.", errors={"user": "This field is required."}
        )
    # (A NUL would be a database error on Postgres, not a name.)
    user = None if "\x00" in name else get_user_model().objects.filter(username=name).first()
    if user is None or not user.is_active:
        problem = f"No active user is named {name!r}."
        raise ClaimInvalid(problem, errors={"user": problem})
    if approval.run.requested_by_id == user.pk:
        problem = f"{name} requested this run and may not decide it (four eyes)."
        raise ClaimInvalid(problem, errors={"user": problem})
    allowed, _ = user_may_decide(user=user, approval=approval)
    if not allowed:
        problem = f"{name} may not decide {approval.tier} actions."
        raise ClaimInvalid(problem, errors={"user": problem})
    return user


def approval_assign(
    *, approval: ApprovalRequest, username: str, by: Any, request: Any = None
) -> ApprovalClaim:
    """Assign a pending approval to a reviewer who may decide it (replacing any claim).

    403 unless ``by`` is an admin or a lead of the tier; 400 (``user``) for an assignee who may
    not decide it; 409 when it is no longer pending.
    """
    allowed, reason = user_may_assign(user=by, approval=approval)
    if not allowed:
        raise ClaimForbidden(reason)
    assignee = _assignee(username, approval)
    now = timezone.now()
    with transaction.atomic():
        _pending_check(approval, now)
        before = (
            ApprovalClaim.objects.select_for_update()
            .select_related("user")
            .filter(approval=approval)
            .first()
        )
        replaced = before.user.get_username() if before and before.is_live(now) else None
        # Whoever held it, the assignment is the lead's decision: the row is theirs now.
        claim, _ = ApprovalClaim.objects.update_or_create(
            approval=approval,
            defaults={"user": assignee, "since": now, "until": None, "assigned_by": by},
        )
        data: dict[str, Any] = {"user": assignee.get_username(), "until": None}
        if replaced and replaced != assignee.get_username():
            data["replaced"] = replaced
        event_record(
            action="approval.assigned",
            actor=by,
            run_id=approval.run_id,
            approval_id=approval.pk,
            tool=approval.tool,
            data=data,
            request=request,
        )
    return claim


def approval_unassign(*, approval: ApprovalRequest, by: Any, request: Any = None) -> None:
    """Take an assignment back (an admin or a lead of the tier). 409 if it is not assigned."""
    allowed, reason = user_may_assign(user=by, approval=approval)
    if not allowed:
        raise ClaimForbidden(reason)
    now = timezone.now()
    with transaction.atomic():
        _pending_check(approval, now)
        claim = (
            ApprovalClaim.objects.select_for_update()
            .select_related("user")
            .filter(approval=approval, assigned_by__isnull=False)
            .first()
        )
        if claim is None:
            raise ClaimConflict("This approval is not assigned to anyone.")
        claim.delete()
        event_record(
            action="approval.unassigned",
            actor=by,
            run_id=approval.run_id,
            approval_id=approval.pk,
            tool=approval.tool,
            data={"user": claim.user.get_username(), "until": None},
            request=request,
        )


def claim_fields() -> dict[str, Any]:
    """Annotations for a read of approvals: who holds each one's claim, and until when (a
    LEFT JOIN, so the decision's locked read brings them without a query of its own)."""
    return {
        "claim_user_id": F("claim__user_id"),
        "claim_username": F("claim__user__username"),
        "claim_until": F("claim__until"),
    }


def claim_note(*, approval: ApprovalRequest, user: Any) -> dict[str, str]:
    """For a decision's audit data: ``{"claimed_by": name}`` when someone else held a live
    claim or assignment (the decision counts all the same), else nothing. ``approval`` was
    read with ``claim_fields()``."""
    holder = getattr(approval, "claim_user_id", None)
    if holder is None or holder == user.pk:
        return {}
    until = approval.claim_until
    if until is not None and until <= timezone.now():
        return {}  # lapsed
    return {"claimed_by": approval.claim_username}
