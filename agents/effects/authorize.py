"""Whether an approval authorizes this effect (invariants 5, 11 and 12): decided, for exactly
these args, still in its tier under the policy in force, of this run, and for this one action."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Exists, F, OuterRef

from agents.effects.canary import canary_refuse
from agents.effects.errors import EffectApprovalMisuse, EffectArgsMismatch, EffectTierRose
from agents.tools import tool_find
from approvals import policy
from approvals.models import ApprovalRequest, Canary
from audit.canonical import canonical_json
from audit.services import event_record
from audit.verify import json_same

ACTOR = "system:ledger"


def approval_read(approval_id: int) -> ApprovalRequest:
    """The approval, with what the ledger's fence asks of its run in the same statement
    (``fence_cancel_requested``, ``fence_lease_owner``, ``fence_lease_expires_at``). A canary's
    approval authorizes nothing: refused (and audited) before it could be spent."""
    approval = ApprovalRequest.objects.annotate(
        fence_cancel_requested=F("run__cancel_requested"),
        fence_lease_owner=F("run__lease_owner"),
        fence_lease_expires_at=F("run__lease_expires_at"),
        fence_canary=Exists(Canary.objects.filter(run_id=OuterRef("run_id"))),
    ).get(pk=approval_id)
    if approval.fence_canary:
        canary_refuse(run_id=approval.run_id, approval_id=approval.pk)
    return approval


def approval_authorize(
    *,
    approval_id: int,
    run_id: str,
    key: str,
    action_key: str,
    approved_args: dict[str, Any],
    approval: ApprovalRequest | None = None,
) -> None:
    """Raise unless the approval authorizes running ``approved_args`` under ``action_key``.
    ``approval``: the row as just read (``approval_read``), else it is read here."""
    approval = _check_approved_args(approval_id=approval_id, args=approved_args, approval=approval)
    _spend(approval=approval, run_id=run_id, key=key, action_key=action_key)


def _spend(*, approval: ApprovalRequest, run_id: str, key: str, action_key: str) -> None:
    """Bind the approval to this run's one action (a conditional write: the first key wins).

    Another run presenting it, or another action of the same run, is refused and audited.
    ``approval`` is the row as just read; its spent key is claimed by a conditional update.
    """
    approval_id = approval.pk
    reason = ""
    if str(approval.run_id) != str(run_id):
        reason = f"approval {approval_id} belongs to run {approval.run_id}, not run {run_id}"
    elif approval.spent_key != action_key and not (
        ApprovalRequest.objects.filter(pk=approval_id, spent_key="").update(spent_key=action_key)
    ):
        spent = ApprovalRequest.objects.values_list("spent_key", flat=True).get(pk=approval_id)
        if spent != action_key:
            reason = f"approval {approval_id} already authorized {spent}, not {action_key}"
    if not reason:
        return
    with transaction.atomic():
        event_record(
            action="effect.refused",
            actor=ACTOR,
            run_id=run_id,
            approval_id=approval_id,
            data={"key": key, "action_key": action_key, "reason": reason},
        )
    raise EffectApprovalMisuse(reason)


def _check_approved_args(
    *, approval_id: int, args: dict[str, Any], approval: ApprovalRequest | None = None
) -> ApprovalRequest:
    if approval is None:
        approval = ApprovalRequest.objects.get(pk=approval_id)
    if approval.status not in (ApprovalRequest.Status.APPROVED, ApprovalRequest.Status.EDITED):
        raise EffectArgsMismatch(f"approval {approval_id} is {approval.status}, not approved")
    decision = approval.decision or {}
    approved = decision["args"] if decision.get("args") is not None else approval.args
    # Equal as JSON values, numbers by exact value: jsonb may give 1e21 back as an integer (the
    # same number), but RFC 8785's doubles would also equate integers beyond 2**53 that differ.
    if not json_same(approved, args):
        raise EffectArgsMismatch(
            f"args differ from the args approved in approval {approval_id}: "
            f"approved {canonical_json(approved)}, about to run {canonical_json(args)}"
        )
    spec = tool_find(approval.tool)
    with policy.policy_fresh():  # the policy in force now, not as this advance first read it
        tier = policy.tier_for_call(
            tool=approval.tool, args=approved, default_tier=spec.tier if spec else approval.tier
        )
        rose = policy.tier_level(tier) > policy.tier_level(approval.tier)
    if rose:
        raise EffectTierRose(
            f"approval {approval_id} was decided in tier {approval.tier}, but its args now "
            f"fall in tier {tier}; a new approval is needed"
        )
    return approval
