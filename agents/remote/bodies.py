"""The wire shape of a remote request (GET body, POST answer, callback body): one function."""

from __future__ import annotations

from typing import Any

from agents.remote.models import RemoteRequest
from approvals.contract import CANCEL_ACTOR, approval_idempotency_key
from approvals.models import ApprovalRequest
from approvals.notification_text import approval_url

CALLBACK_TYPE = "approval_request.decided"


def remote_approvals(remote: RemoteRequest) -> list[ApprovalRequest]:
    """The request's approvals in action order (with their reported outcomes)."""
    return list(
        ApprovalRequest.objects.filter(
            run_id=remote.run_id, interrupt_id=remote.approval_interrupt_id
        )
        .select_related("outcome_report", "run")
        .order_by("action_index")
    )


def remote_approvals_many(remotes: list[RemoteRequest]) -> dict[Any, list[ApprovalRequest]]:
    """``remote_approvals`` for a page of requests in one query, by request id."""
    found: dict[Any, list[ApprovalRequest]] = {remote.pk: [] for remote in remotes}
    if not remotes:
        return found
    owner = {(r.run_id, r.approval_interrupt_id): r.pk for r in remotes}
    rows = (
        ApprovalRequest.objects.filter(
            run_id__in={r.run_id for r in remotes},
            interrupt_id__in={r.approval_interrupt_id for r in remotes},
        )
        .select_related("outcome_report", "run")
        .order_by("action_index")
    )
    for approval in rows:
        pk = owner.get((approval.run_id, approval.interrupt_id))
        if pk is not None:
            found[pk].append(approval)
    return found


def approval_wire_status(approval: ApprovalRequest, *, request_cancelled: bool = False) -> str:
    """The approval's status as the agent reads it: a cancel's closing reads "cancelled", and
    so does any approval of a request closed as cancelled (an approve or edit that came before
    the cancel never reached the agent: it is not one to act on; ``decision`` keeps the record)."""
    if request_cancelled or (
        approval.status == ApprovalRequest.Status.EXPIRED
        and approval.decided_by_label == CANCEL_ACTOR
    ):
        return "cancelled"
    return approval.status


def outcome_body(approval: ApprovalRequest) -> dict[str, Any] | None:
    outcome = getattr(approval, "outcome_report", None)
    if outcome is None:
        return None
    return {
        "status": outcome.status,
        "args_match": outcome.args_match,
        "flags": list(outcome.flags),
        "reported_at": outcome.reported_at.isoformat(),
    }


def approval_body(
    approval: ApprovalRequest, *, thread_id: str, request_cancelled: bool = False
) -> dict[str, Any]:
    decision = None
    if not approval.is_pending and isinstance(approval.decision, dict) and approval.decision:
        value = approval.decision
        decision = {
            "decision": value.get("decision"),
            "args": value.get("args") if isinstance(value.get("args"), dict) else {},
            "message": value.get("message") or "",
            "by": value.get("by") or approval.decided_by_label,
        }
    return {
        "id": approval.id,
        "action_index": approval.action_index,
        "tool": approval.tool,
        "tier": approval.tier,
        "status": approval_wire_status(approval, request_cancelled=request_cancelled),
        "payload_hash": approval.payload_hash,
        "idempotency_key": approval_idempotency_key(
            thread_id=thread_id,
            interrupt_id=approval.interrupt_id,
            action_index=approval.action_index,
        ),
        "url": approval_url(approval),
        "expires_at": approval.expires_at.isoformat(),
        "decision": decision,
        "outcome": outcome_body(approval),
    }


def remote_request_body(
    *, remote: RemoteRequest, approvals: list[ApprovalRequest] | None = None
) -> dict[str, Any]:
    """What the agent reads about its request (the callback adds ``"type"``)."""
    rows = remote_approvals(remote) if approvals is None else approvals
    thread = rows[0].run.thread_id if rows else remote.run.thread_id
    cancelled = remote.status == RemoteRequest.Status.CANCELLED
    return {
        "id": str(remote.id),
        "thread_id": remote.thread_id,
        "interrupt_id": remote.interrupt_id,
        "run_id": str(remote.run_id),
        "status": remote.status,
        "protocol": remote.protocol,
        "approvals": [
            approval_body(a, thread_id=thread, request_cancelled=cancelled) for a in rows
        ],
        "resume": remote.resume if remote.status == RemoteRequest.Status.DECIDED else None,
        "created_at": remote.created_at.isoformat(),
        "decided_at": remote.decided_at.isoformat() if remote.decided_at else None,
    }
