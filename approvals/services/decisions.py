"""Deciding an approval: validation, permissions, the edit preview and quorum (the checks are in
``decision_checks``, the final outcome in ``decision_final``). One transaction per vote, with its audit events (invariants 3, 5 and 12)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals import policy
from approvals.changes import changes_check
from approvals.models import ApprovalRequest, ApprovalVote
from approvals.permissions import user_may_decide
from approvals.services.canaries import canary_exists
from approvals.services.claims import claim_fields, claim_note
from approvals.services.decision_checks import (
    args_check,
    decision_args,
    edit_preview,
    edit_tier_check,
    erased_refusal,
    reason_check,
    required_group_check,
)
from approvals.services.decision_final import approval_finalise
from approvals.services.errors import (
    DecisionConflict,
    DecisionForbidden,
    DecisionInvalid,
    PreviewRequired,
)
from approvals.services.rounds import round_start, tier_raise
from audit.canonical import canonical_hash, json_has_nul
from audit.services import event_record
from core.sealing import datakey_scope


def _erased_check(approval: ApprovalRequest) -> None:  # erased, or its key's master key gone
    refusal = erased_refusal(
        run=approval.run, values=(approval.args, approval.payload), noun="approval"
    )
    if refusal:
        raise DecisionConflict(refusal[1], reason=refusal[0], approval=approval)


def approval_edit_preview(*, approval: ApprovalRequest, args: dict[str, Any]) -> dict[str, Any]:
    """The edit as the reviewer must confirm it: {"args", "diff" against the proposal,
    "hash" of the args}. Raises ArgsInvalid (``args.<field>``) when the tool's schema refuses
    them."""
    args_check(approval=approval, args=args)
    return edit_preview(approval=approval, args=args)


def approval_decide(
    *,
    approval: ApprovalRequest,
    user: Any,
    decision: str,
    seen_hash: str,
    args: dict[str, Any] | None = None,
    message: str = "",
    note: str = "",
    request: Any = None,
    previewed_hash: str | None = None,
    require_preview: bool = False,
    via: str = "",
    changes_seen: str | None = None,
    reason: str = "",
) -> ApprovalRequest:
    """Vote on an approval; final once the tier's quorum is met (see docs/policy.md).

    Row lock, payload-hash binding, single use (invariant 5). Reject and respond are final at
    once; approve and edit count toward a quorum of distinct people. An edit that is not final
    starts a new round for the edited args (the payload hash changes, earlier votes lapse).
    With ``require_preview`` (the page), an edit counts only when ``previewed_hash`` is the
    hash of exactly these args, so nobody confirms values whose diff they did not see;
    otherwise PreviewRequired carries the diff to show. If what the approval rests on changed
    while it waited (approvals/changes.py), ``changes_seen`` must be the digest of those
    changes, else ChangesNotAcknowledged (428) lists them; the audit records the warning.
    ``via`` ("link", "slack") says where the decision came from, in the vote's audit event.
    ``reason``: a rejection's category (ApprovalRequest.RejectReason), refused otherwise.
    """
    _erased_check(approval)  # first, before the args are read: a 409 whoever asks
    allowed, refusal = user_may_decide(user=user, approval=approval)
    if not allowed:
        raise DecisionForbidden(refusal)
    for field, value in (("args", args), ("message", message), ("note", note)):
        if json_has_nul(value):
            raise DecisionInvalid(
                "Text with a NUL character.", errors={field: "must not contain \\u0000"}
            )
    reason_check(decision=decision, reason=reason)
    resume_args = decision_args(approval=approval, decision=decision, args=args, message=message)
    if decision == ApprovalRequest.Decision.EDIT:
        if require_preview:
            preview = edit_preview(approval=approval, args=resume_args)
            if previewed_hash != preview["hash"]:
                raise PreviewRequired(preview=preview, stale=previewed_hash is not None)
        edit_tier_check(approval=approval, user=user, args=resume_args)
    # One data-key cache for the decision (the request's, on a page): one key query.
    with datakey_scope(), transaction.atomic():
        locked = (
            # The approval and its run, not the requester's user row: a run that requester
            # starts meanwhile checks its foreign key to that row and would deadlock with us.
            ApprovalRequest.objects.select_for_update(of=("self", "run"))
            .select_related("run", "run__requested_by")
            .annotate(**claim_fields())  # who holds its claim (read, not locked)
            .annotate(is_canary=canary_exists())  # closed as a canary (services/canaries.py)
            .get(pk=approval.pk)
        )
        _erased_check(locked)  # again under the lock: erased meanwhile
        if locked.status != ApprovalRequest.Status.PENDING:
            by = locked.decided_by_label or "someone"
            raise DecisionConflict(
                f"Already {locked.status} by {by}.", reason="already_decided", approval=locked
            )
        if locked.expires_at <= timezone.now():
            raise DecisionConflict("This approval has expired.", reason="expired", approval=locked)
        if seen_hash != locked.payload_hash:
            raise DecisionConflict(
                "The action changed since you loaded it; reload and review it again.",
                reason="hash_mismatch",
                approval=locked,
            )
        warned = changes_check(approval=locked, changes_seen=changes_seen)
        votes = list(
            locked.votes.filter(round=locked.quorum_round).select_related("user").order_by("id")
        )
        if any(vote.user_id == user.pk for vote in votes):
            raise DecisionConflict(
                "You already voted on this approval; the quorum needs someone else.",
                reason="already_voted",
                approval=locked,
            )
        raised = decision == ApprovalRequest.Decision.EDIT and tier_raise(
            approval=locked, args=resume_args, by=user, request=request
        )
        if raised:
            votes = []  # a new round in the higher tier: earlier votes lapse (invariant 12)
        tier = policy.tier_get(locked.tier)
        required = max(1, tier.required_approvals) if tier else 1
        final = True
        if decision in (ApprovalRequest.Decision.APPROVE, ApprovalRequest.Decision.EDIT):
            if decision == ApprovalRequest.Decision.EDIT and resume_args != locked.args:
                votes = []  # the edited args are a new proposal: earlier votes do not count
            final = len(votes) + 1 >= required
            if final:
                required_group_check(tier=tier, voters=[v.user for v in votes] + [user])
            elif decision == ApprovalRequest.Decision.EDIT and resume_args != locked.args:
                round_start(approval=locked, args=resume_args, by=user)
        ApprovalVote.objects.create(
            approval=locked,
            user=user,
            round=locked.quorum_round,
            decision=decision,
            args=resume_args,
            args_hash=canonical_hash(resume_args),
            message=message,
        )
        approving = decision in (ApprovalRequest.Decision.APPROVE, ApprovalRequest.Decision.EDIT)
        counted = votes if approving else []  # reject and respond are one person's call
        voters = [v.user.get_username() for v in counted] + [user.get_username()]
        event_record(
            action="approval.voted",
            actor=user,
            run_id=locked.run_id,
            approval_id=locked.id,
            tool=locked.tool,
            data={
                "decision": decision,
                "round": locked.quorum_round,
                "payload_hash": locked.payload_hash,
                "received": len(voters) if approving else 0,
                "required": required,
                "final": final,
                **({"via": via} if via else {}),
                **({"warned": warned} if warned else {}),
                **claim_note(approval=locked, user=user),  # a claim never blocks a decision
            },
            private={"args": resume_args, "message": message, "note": note},
            request=request,
        )
        if final:
            approval_finalise(
                approval=locked,
                user=user,
                decision=decision,
                final_args=resume_args,
                voters=voters,
                messages=[v.message for v in counted] + [message],
                required=required,
                tier=tier,
                note=note,
                request=request,
                warned=warned,
                reason=reason,
            )
    return locked
