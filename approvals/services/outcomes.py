"""Outcomes: what an agent reports it executed for an approval (external agents report over
``/api/approval-requests/{id}/outcome/``). Recorded as reported, audited ``effect.reported``
with whether the executed args are the approved ones; a mismatch is flagged, never hidden."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from approvals.contract import approval_idempotency_key
from approvals.models import ApprovalOutcome, ApprovalRequest, StuckItem
from audit.canonical import canonical_hash
from audit.services import event_record
from core.errors import ApplicationError

FINAL_GO = (ApprovalRequest.Status.APPROVED, ApprovalRequest.Status.EDITED)


# An expression over ApprovalRequest true for approvals whose decision never reached their
# agent (agents.remote: the request was closed as cancelled), so no outcome is expected of it.
# approvals/ never imports agents/: the agents app registers it at start-up.
UntoldProvider = Callable[[], Any]
_untold: UntoldProvider | None = None


def outcome_untold_provider_set(provider: UntoldProvider | None) -> None:
    """Register the expression factory (agents' AppConfig.ready)."""
    global _untold
    _untold = provider


def outcome_untold_expression() -> Any:
    """The registered expression, or one that is never true (nothing registered)."""
    return _untold() if _untold is not None else Q(pk__in=[])


def outcome_not_expected(approval: ApprovalRequest) -> bool:
    """Whether the agent was never told this approval's decision (one indexed read)."""
    if _untold is None:
        return False
    return ApprovalRequest.objects.filter(pk=approval.pk).filter(_untold()).exists()


class OutcomeConflict(ApplicationError):
    """Another report for this approval, or a key that is not the approval's (409)."""

    status_code = 409


def approval_key(approval: ApprovalRequest) -> str:
    """The idempotency key the console issued for this approval's action."""
    return approval_idempotency_key(
        thread_id=approval.run.thread_id,
        interrupt_id=approval.interrupt_id,
        action_index=approval.action_index,
    )


def approved_args(approval: ApprovalRequest) -> dict[str, Any]:
    """The args a decision let the agent run with (the edited ones after an edit)."""
    decision = approval.decision if isinstance(approval.decision, dict) else {}
    args = decision.get("args")
    return args if isinstance(args, dict) else approval.args


def approval_outcome_record(
    *,
    approval: ApprovalRequest,
    idempotency_key: str,
    executed_args: dict[str, Any],
    result: Any,
    status: str,
    actor: Any,
    request: Any = None,
) -> tuple[ApprovalOutcome, bool]:
    """Record the one outcome of ``approval``; (outcome, created). The same report again
    returns the stored one; another report, or a key that is not the approval's, is refused."""
    if idempotency_key != approval_key(approval):
        raise OutcomeConflict(
            "This idempotency_key is not the one issued for this approval.",
            errors={"idempotency_key": "is not the approval's key"},
        )
    report_hash = canonical_hash(
        {"key": idempotency_key, "args": executed_args, "result": result, "status": status}
    )
    existing = ApprovalOutcome.objects.filter(approval=approval).first()
    if existing is not None:
        return _same(existing, report_hash), False
    args_hash = canonical_hash(executed_args)
    go = approval.status in FINAL_GO
    args_match = go and args_hash == canonical_hash(approved_args(approval))
    # Not approved: pending (it ran before any decision), rejected, expired... or approved
    # but never told so (its request was closed as cancelled).
    told = go and not outcome_not_expected(approval)
    flags = [] if told else [ApprovalOutcome.FLAG_NOT_APPROVED]
    if go and not args_match:
        flags.append(ApprovalOutcome.FLAG_ARGS_DIFFER)
    try:
        with transaction.atomic():
            outcome = ApprovalOutcome.objects.create(
                approval=approval,
                idempotency_key=idempotency_key,
                status=status,
                executed_args=executed_args,
                executed_args_hash=args_hash,
                result=result,
                report_hash=report_hash,
                args_match=args_match,
                flags=flags,
                reported_by=str(actor)[:150],
            )
            event_record(
                action="effect.reported",
                actor=actor,
                run_id=approval.run_id,
                approval_id=approval.id,
                tool=approval.tool,
                data={
                    "idempotency_key": idempotency_key,
                    "status": status,
                    "args_match": args_match,
                    "flags": flags,
                    "approval_status": approval.status,
                    "executed_args_hash": args_hash,
                },
                private={"executed_args": executed_args, "result": result},
                request=request,
            )
            outcome_stuck_clear(approval=approval)
    except IntegrityError:  # a concurrent report won
        return _same(ApprovalOutcome.objects.get(approval=approval), report_hash), False
    return outcome, True


def _same(existing: ApprovalOutcome, report_hash: str) -> ApprovalOutcome:
    if existing.report_hash != report_hash:
        raise OutcomeConflict(
            "Another outcome was already reported for this approval.",
            errors={"approval_id": "has another reported outcome"},
        )
    return existing


def outcome_stuck_clear(*, approval: ApprovalRequest) -> None:
    """The open "outcome not reported" item of this approval, cleared (audited)."""
    item = StuckItem.objects.filter(
        kind=StuckItem.Kind.OUTCOME_NOT_REPORTED, key=str(approval.pk), cleared_at__isnull=True
    ).first()
    if item is None:
        return
    now = timezone.now()
    if StuckItem.objects.filter(pk=item.pk, cleared_at__isnull=True).update(cleared_at=now):
        event_record(
            action="stuck.cleared",
            actor="system:outcome",
            run_id=item.run_id,
            data={"kind": item.kind, "key": item.key, "raised_at": item.raised_at.isoformat()},
        )
