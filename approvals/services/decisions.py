"""Deciding an approval: validation, permissions, the edit preview, quorum, and the final
outcome. One transaction per vote, with its audit events (invariants 3, 5 and 12)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals import contract, policy
from approvals.diff import args_diff
from approvals.models import ApprovalRequest, ApprovalVote, Notification, RiskTier
from approvals.notifications import notifications_create
from approvals.permissions import user_in_group, user_may_approve_tier, user_may_decide
from approvals.rollups import approval_rollup_add
from approvals.schema import args_errors
from approvals.services.errors import (
    ArgsInvalid,
    DecisionConflict,
    DecisionForbidden,
    DecisionInvalid,
    PreviewRequired,
)
from approvals.services.rounds import round_start, tier_raise
from approvals.services.runs import run_advance_enqueue
from approvals.tracing import approval_wait_record
from audit.canonical import canonical_hash, json_has_nul
from audit.services import event_record
from core.json_limits import json_problem
from core.prometheus import decision_observe
from core.sealing import datakey_scope, is_erased, sealed_label


def _erased_check(approval: ApprovalRequest) -> None:  # erased, or its key's master key gone
    if approval.run.erased_at is not None:
        raise DecisionConflict(
            "This run's personal data was erased: its approvals can no longer be decided.",
            reason="erased",
            approval=approval,
        )
    for value in (v for v in (approval.args, approval.payload) if is_erased(v)):
        text = f"This approval's data {sealed_label(value)}."
        raise DecisionConflict(text, reason="unreadable", approval=approval)


def approval_edit_preview(*, approval: ApprovalRequest, args: dict[str, Any]) -> dict[str, Any]:
    """The edit as the reviewer must confirm it: {"args", "diff" against the proposal,
    "hash" of the args}. Raises ArgsInvalid (``args.<field>``) when the tool's schema refuses
    them."""
    _args_check(approval=approval, args=args)
    return _preview(approval=approval, args=args)


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
) -> ApprovalRequest:
    """Vote on an approval; final once the tier's quorum is met (see docs/policy.md).

    Row lock, payload-hash binding, single use (invariant 5). Reject and respond are final at
    once; approve and edit count toward a quorum of distinct people. An edit that is not final
    starts a new round for the edited args (the payload hash changes, earlier votes lapse).
    With ``require_preview`` (the page), an edit counts only when ``previewed_hash`` is the
    hash of exactly these args, so nobody confirms values whose diff they did not see;
    otherwise PreviewRequired carries the diff to show.
    """
    _erased_check(approval)  # first, before the args are read: a 409 whoever asks
    allowed, reason = user_may_decide(user=user, approval=approval)
    if not allowed:
        raise DecisionForbidden(reason)
    for field, value in (("args", args), ("message", message), ("note", note)):
        if json_has_nul(value):
            raise DecisionInvalid(
                "Text with a NUL character.", errors={field: "must not contain \\u0000"}
            )
    resume_args = _decision_args(approval=approval, decision=decision, args=args, message=message)
    if decision == ApprovalRequest.Decision.EDIT:
        if require_preview:
            preview = _preview(approval=approval, args=resume_args)
            if previewed_hash != preview["hash"]:
                raise PreviewRequired(preview=preview, stale=previewed_hash is not None)
        _edit_tier_check(approval=approval, user=user, args=resume_args)
    # One data-key cache for the decision (the request's, on a page): one key query.
    with datakey_scope(), transaction.atomic():
        locked = (
            # The approval and its run, not the requester's user row: a run that requester
            # starts meanwhile checks its foreign key to that row and would deadlock with us.
            ApprovalRequest.objects.select_for_update(of=("self", "run"))
            .select_related("run", "run__requested_by")
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
                _required_group_check(tier=tier, voters=[v.user for v in votes] + [user])
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
            },
            private={"args": resume_args, "message": message, "note": note},
            request=request,
        )
        if final:
            _approval_finalise(
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
            )
    return locked


def approval_close(
    *,
    approval: ApprovalRequest,
    status: str,
    decided_by: Any,
    label: str,
    value: dict[str, Any],
    now: dt.datetime,
) -> None:
    """Store the final outcome on a locked approval; nothing is due for it afterwards."""
    approval.status = status
    approval.decided_by = decided_by
    approval.decided_by_label = label
    approval.decided_at = now
    approval.decision = value
    approval.remind_at = None
    approval.escalate_at = None
    approval.save(
        update_fields=[
            "status",
            "decided_by",
            "decided_by_label",
            "decided_at",
            "decision",
            "remind_at",
            "escalate_at",
        ]
    )
    approval_rollup_add(approval=approval)  # the metrics count it in the same transaction


# --- checks --------------------------------------------------------------------------------


def _decision_args(
    *, approval: ApprovalRequest, decision: str, args: dict[str, Any] | None, message: str
) -> dict[str, Any]:
    """The args the decision runs with, once the decision and its input are valid here."""
    if decision not in ApprovalRequest.Decision.values:
        raise DecisionInvalid(
            "Unknown decision.",
            errors={"decision": f"must be one of {', '.join(ApprovalRequest.Decision.values)}"},
        )
    allowed = approval.allowed_decisions or ApprovalRequest.Decision.values
    if decision not in allowed:
        raise DecisionInvalid(
            "Decision not allowed here.",
            errors={
                "decision": f"{decision!r} is not allowed for this approval ({', '.join(allowed)})"
            },
        )
    if decision == "respond" and not message.strip():
        raise DecisionInvalid(
            "A response needs a message.", errors={"message": "required to respond"}
        )
    if decision != "edit":
        if args is not None and args != approval.args:
            raise DecisionInvalid(
                "Args can only change with an edit.",
                errors={"args": "only allowed with decision 'edit'"},
            )
        return approval.args
    if not isinstance(args, dict):
        raise DecisionInvalid(
            "An edit needs the edited args.", errors={"args": "required to edit (an object)"}
        )
    _args_check(approval=approval, args=args)
    return args


def _args_check(*, approval: ApprovalRequest, args: dict[str, Any]) -> None:
    """Edited args must match the args schema the gate put into the payload."""
    inexact = json_problem(
        args, prefix="args", exact=True
    )  # the audit hashes RFC 8785 text (invariant 15)
    if inexact:
        raise ArgsInvalid(
            "The edited args cannot be recorded exactly.", errors={inexact.path: inexact.message}
        )
    payload = approval.payload if isinstance(approval.payload, dict) else {}
    errors = args_errors(schema=payload.get("args_schema"), args=args)
    if errors:
        raise ArgsInvalid("The edited args are not valid.", errors=errors)


def _preview(*, approval: ApprovalRequest, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "args": args,
        "diff": args_diff(approval.args or {}, args),
        "hash": canonical_hash(args),
    }


def _edit_tier_check(*, approval: ApprovalRequest, user: Any, args: dict[str, Any]) -> None:
    """An edit that moves the call into a higher tier needs someone allowed for that tier (a
    member of its required group, where it names one)."""
    new_tier = policy.tier_for_call(tool=approval.tool, args=args, default_tier=approval.tier)
    if new_tier == approval.tier or policy.tier_level(new_tier) <= policy.tier_level(approval.tier):
        return
    if ApprovalRequest.Decision.EDIT not in policy.tier_allowed_decisions(new_tier):
        raise DecisionForbidden(
            f"These args put {approval.tool} in tier {new_tier} (above {approval.tier}), "
            f"which does not allow edits."
        )
    allowed, _ = user_may_approve_tier(user=user, tier=new_tier)
    row = policy.tier_get(new_tier)
    if allowed and row is not None and row.required_group_id is not None:
        # Where the tier names a required group, only its members may move a call into it.
        allowed = user_in_group(user=user, group_id=row.required_group_id)
    if not allowed:
        raise DecisionForbidden(
            f"These args put {approval.tool} in tier {new_tier} (above {approval.tier}); "
            f"you may not approve {new_tier} actions."
        )


def _required_group_check(*, tier: RiskTier | None, voters: list[Any]) -> None:
    if tier is None or tier.required_group_id is None:
        return
    if any(user_in_group(user=voter, group_id=tier.required_group_id) for voter in voters):
        return
    raise DecisionForbidden(
        f"Tier {tier.name} needs an approval from a member of {tier.required_group.name}; "
        "the last approval must come from one."
    )


# --- quorum rounds and the final outcome ---------------------------------------------------


def _approval_finalise(
    *,
    approval: ApprovalRequest,
    user: Any,
    decision: str,
    final_args: dict[str, Any],
    voters: list[str],
    messages: list[str],
    required: int,
    tier: RiskTier | None,
    note: str,
    request: Any,
) -> None:
    """Status, resume value, audit and notification of a final decision; advance on commit."""
    proposed = approval.proposed_args
    if decision == ApprovalRequest.Decision.APPROVE and canonical_hash(
        final_args
    ) != canonical_hash(proposed):
        decision = ApprovalRequest.Decision.EDIT  # approving an edited proposal runs the edit
    now = timezone.now()
    label = ", ".join(voters)[:150]
    message = "\n".join(m for m in dict.fromkeys(messages) if m)
    value = contract.decision_value(
        decision=decision,
        args=final_args,
        message=message,
        by=label,
        approval_id=approval.id,
        tier=approval.tier,
        policy_version=approval.policy_version,
        decided_at=now,
    )
    approval_close(
        approval=approval,
        status=ApprovalRequest.DECISION_STATUS[decision],
        decided_by=user,
        label=label,
        value=value,
        now=now,
    )
    role = _role(user)
    event_record(
        action="approval.decided",
        actor=user,
        run_id=approval.run_id,
        approval_id=approval.id,
        tool=approval.tool,
        data={
            "decision": decision,
            "role": role,
            "quorum": {"required": required, "approvers": voters},
            "policy_version": approval.policy_version,
        },
        private={
            "shown": {"payload": approval.payload, "payload_hash": approval.payload_hash},
            "proposed_args": proposed,
            "final_args": final_args,
            "diff": args_diff(proposed, final_args) if decision == "edit" else {},
            "message": message,
            "note": note,
        },
        request=request,
    )
    notifications_create(
        approval=approval,
        event=Notification.Event.DECISION,
        tier=tier,
        detail=f"{label} chose {decision}.",
    )
    approval_wait_record(approval=approval, decision=decision, role=role)
    run_advance_enqueue(run_id=approval.run_id)
    seconds = (now - approval.created_at).total_seconds()  # observed once it is committed
    transaction.on_commit(
        lambda: decision_observe(tier=approval.tier, decision=decision, seconds=seconds)
    )


def _role(user: Any) -> str:
    if user.is_superuser:
        return "admin"
    groups = sorted(user.groups.values_list("name", flat=True))
    return ",".join(groups) if groups else "approver"
