"""The checks a decision passes before it is recorded: the decision and its input, edited args
against the payload's schema, the edit's tier, and the tier's required group."""

from __future__ import annotations

from typing import Any

from approvals import policy
from approvals.diff import args_diff
from approvals.models import ApprovalRequest, RiskTier
from approvals.permissions import user_in_group, user_may_approve_tier
from approvals.schema import args_errors
from approvals.services.errors import ArgsInvalid, DecisionForbidden, DecisionInvalid
from audit.canonical import canonical_hash
from core.json_limits import json_problem
from core.sealing import is_erased, sealed_label


def decision_args(
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
    args_check(approval=approval, args=args)
    return args


def args_check(*, approval: ApprovalRequest, args: dict[str, Any]) -> None:
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


def edit_preview(*, approval: ApprovalRequest, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "args": args,
        "diff": args_diff(approval.args or {}, args),
        "hash": canonical_hash(args),
    }


def edit_tier_check(*, approval: ApprovalRequest, user: Any, args: dict[str, Any]) -> None:
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


def required_group_check(*, tier: RiskTier | None, voters: list[Any]) -> None:
    if tier is None or tier.required_group_id is None:
        return
    if any(user_in_group(user=voter, group_id=tier.required_group_id) for voter in voters):
        return
    raise DecisionForbidden(
        f"Tier {tier.name} needs an approval from a member of {tier.required_group.name}; "
        "the last approval must come from one."
    )


def reason_check(*, decision: str, reason: str) -> None:
    """A rejection's reason is one of RejectReason (or none); other decisions take none."""
    if not reason:
        return
    if decision != ApprovalRequest.Decision.REJECT:
        raise DecisionInvalid(
            "A reason is given with a rejection only.", errors={"reason": "only with reject"}
        )
    if reason not in ApprovalRequest.RejectReason.values:
        choices = ", ".join(ApprovalRequest.RejectReason.values)
        raise DecisionInvalid(
            f"Unknown rejection reason {reason!r}.", errors={"reason": f"one of {choices}"}
        )


def erased_refusal(*, run: Any, values: tuple[Any, ...], noun: str) -> tuple[str, str] | None:
    """(reason, text) when nothing may be decided on these values: the run's personal data
    was erased, or a value's key is gone (unreadable); else None."""
    if run.erased_at is not None:
        return (
            "erased",
            f"This run's personal data was erased: its {noun}s can no longer be decided.",
        )
    for value in (v for v in values if is_erased(v)):
        return "unreadable", f"This {noun}'s data {sealed_label(value)}."
    return None
