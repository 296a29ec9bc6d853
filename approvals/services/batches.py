"""Deciding a batch: one decision for several related approvals (approvals/batch_selectors.py).

Each item is decided by ``approval_decide`` in its own transaction, bound to the payload hash
the reviewer saw for that item: its own quorum, its own audit events, its own run advance. One
item refused (stale hash, decided meanwhile, expired, changes to acknowledge) never undoes or
blocks the others; the result says per item what happened. Only approve and reject: an edit
needs its own preview, a response its own words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from approvals.models import ApprovalRequest
from approvals.permissions import run_visible_filter
from approvals.selectors import approval_quorum
from approvals.services.decisions import approval_decide
from approvals.services.errors import (
    ChangesNotAcknowledged,
    DecisionConflict,
    DecisionError,
    DecisionForbidden,
    DecisionInvalid,
)
from audit.services import event_record

BATCH_DECISIONS = (ApprovalRequest.Decision.APPROVE, ApprovalRequest.Decision.REJECT)
BATCH_MAX_ITEMS = 100


@dataclass(frozen=True)
class ItemResult:
    """What became of one item: ``status`` as HTTP says it (200 decided or voted, 403, 409,
    428, 400), ``outcome`` in a word, ``detail`` in a sentence."""

    id: int
    status: int
    outcome: str  # approved, rejected, voted, forbidden, changes, invalid, or a 409's reason
    detail: str = ""
    received: int | None = None  # a vote: approvals counted so far in its quorum
    required: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "outcome": self.outcome,
            "detail": self.detail,
            "received": self.received,
            "required": self.required,
        }


def approval_batch_decide(
    *,
    user: Any,
    decision: str,
    items: Sequence[tuple[int, str]],
    agent: str,
    tool: str,
    tier: str,
    message: str = "",
    request: Any = None,
) -> list[ItemResult]:
    """Decide each of ``items`` ((approval id, payload hash seen)) of the batch (agent, tool,
    tier) with ``decision``; returns one ItemResult per item, in the order given.

    The request is refused whole (DecisionInvalid naming ``items[i].id``, nothing decided) when
    an item is unknown to the reader, named twice, or not of this batch: a batch never crosses
    tiers. Then one audit event ``approval.batch_decided`` records the per-item outcome."""
    if decision not in BATCH_DECISIONS:
        raise DecisionInvalid(
            "A batch is approved or rejected; edit or respond to an item on its own page.",
            errors={"decision": "must be approve or reject"},
        )
    if not items:
        raise DecisionInvalid("Select at least one approval.", errors={"items": "is empty"})
    if len(items) > BATCH_MAX_ITEMS:
        raise DecisionInvalid(
            f"At most {BATCH_MAX_ITEMS} approvals at once.",
            errors={"items": f"must hold at most {BATCH_MAX_ITEMS} items"},
        )
    approvals = _batch_approvals(user=user, items=items, agent=agent, tool=tool, tier=tier)
    results = [
        _item_decide(
            approval=approval,
            seen_hash=seen_hash,
            user=user,
            decision=decision,
            message=message,
            request=request,
        )
        for approval, (_, seen_hash) in zip(approvals, items, strict=True)
    ]
    with transaction.atomic():
        event_record(
            action="approval.batch_decided",
            actor=user,
            tool=tool,
            data={
                "batch": f"{agent}/{tool}/{tier}",
                "decision": decision,
                "items": [result.id for result in results],
                # The message is personal data: each item's approval.voted keeps it, sealed.
                "results": [
                    {"id": r.id, "status": r.status, "outcome": r.outcome} for r in results
                ],
            },
            request=request,
        )
    return results


def _batch_approvals(
    *, user: Any, items: Sequence[tuple[int, str]], agent: str, tool: str, tier: str
) -> list[ApprovalRequest]:
    """The approvals named by ``items``, in order, each checked to belong to the batch."""
    ids = [item_id for item_id, _ in items]
    found = {
        approval.pk: approval
        for approval in ApprovalRequest.objects.select_related("run", "run__requested_by")
        .filter(run_visible_filter(user=user, via="run__"))
        .filter(pk__in=ids)
    }
    seen: set[int] = set()
    approvals = []
    for index, item_id in enumerate(ids):
        field = f"items[{index}].id"
        approval = found.get(item_id)
        if approval is None:
            raise DecisionInvalid(f"No approval #{item_id}.", errors={field: "no such approval"})
        if item_id in seen:
            raise DecisionInvalid(
                f"Approval #{item_id} is named twice.", errors={field: "named twice"}
            )
        seen.add(item_id)
        if (approval.run.agent, approval.tool, approval.tier) != (agent, tool, tier):
            raise DecisionInvalid(
                f"Approval #{item_id} is {approval.run.agent}/{approval.tool}/{approval.tier}, "
                f"not of the batch {agent}/{tool}/{tier}: a batch never crosses agents, tools "
                "or tiers. Nothing was decided.",
                errors={field: f"not of the batch {agent}/{tool}/{tier}"},
            )
        approvals.append(approval)
    return approvals


def _item_decide(
    *,
    approval: ApprovalRequest,
    seen_hash: str,
    user: Any,
    decision: str,
    message: str,
    request: Any,
) -> ItemResult:
    try:
        decided = approval_decide(
            approval=approval,
            user=user,
            decision=decision,
            seen_hash=seen_hash,
            message=message,
            request=request,
            via="batch",
        )
    except DecisionConflict as exc:
        return ItemResult(approval.pk, exc.status_code, exc.reason, exc.message)
    except DecisionForbidden as exc:
        return ItemResult(approval.pk, exc.status_code, "forbidden", exc.message)
    except ChangesNotAcknowledged as exc:
        # Each change must be seen on the item's own page; a batch cannot confirm them.
        text = f"{exc.message} Open it alone to decide it."
        return ItemResult(approval.pk, exc.status_code, "changes", text)
    except DecisionError as exc:
        return ItemResult(approval.pk, exc.status_code, "invalid", exc.message)
    if decided.is_pending:
        quorum = approval_quorum(approval=decided)
        received, required = quorum["received"], quorum["required"]
        text = f"Your vote counts: {received} of {required} approvals."
        return ItemResult(approval.pk, 200, "voted", text, received, required)
    return ItemResult(approval.pk, 200, decided.status, f"You {decided.status} it.")
