"""Outcomes: what an agent reports it executed for an approval (external agents report over
``/api/approval-requests/{id}/outcome/``). Recorded as reported, audited ``effect.reported``
with whether the executed args are the approved ones; a mismatch is flagged, never hidden."""

from __future__ import annotations

import datetime as dt
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


# An expression over ApprovalRequest, true for approvals whose decision reached their agent
# (agents.remote: the request was closed as decided, with its resume value), before a given
# moment when one is given. An approval approved while its request still waits on another
# action, or whose request was closed as cancelled, was never told: no outcome is expected of
# it (yet). approvals/ never imports agents/: the agents app registers it at start-up.
ToldProvider = Callable[[dt.datetime | None], Any]
_told: ToldProvider | None = None


def outcome_told_provider_set(provider: ToldProvider | None) -> None:
    """Register the expression factory (agents' AppConfig.ready)."""
    global _told
    _told = provider


def outcome_told_expression(*, before: dt.datetime | None = None) -> Any:
    """The registered expression (told, and before ``before`` if given), or one never true."""
    return _told(before) if _told is not None else Q(pk__in=[])


def outcome_not_expected(approval: ApprovalRequest) -> bool:
    """Whether the agent was not (yet) told this approval's decision (one indexed read)."""
    if _told is None:
        return False
    return not ApprovalRequest.objects.filter(pk=approval.pk).filter(_told(None)).exists()


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
    if existing is not None and not (
        existing.status == ApprovalOutcome.Status.FAILED and existing.report_hash != report_hash
    ):
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
    report = {
        "idempotency_key": idempotency_key,
        "status": status,
        "executed_args": executed_args,
        "executed_args_hash": args_hash,
        "result": result,
        "report_hash": report_hash,
        "args_match": args_match,
        "flags": flags,
        "reported_by": str(actor)[:150],
    }
    if existing is not None:  # a failed attempt, retried under the same key: the retry's report
        return _after_failure(existing, report=report, actor=actor, request=request), True
    try:
        with transaction.atomic():
            outcome = ApprovalOutcome.objects.create(approval=approval, **report)
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


def _after_failure(
    failed: ApprovalOutcome, *, report: dict[str, Any], actor: Any, request: Any
) -> ApprovalOutcome:
    """A report after a failed one (the call was retried under its key): it becomes the
    outcome, under the row lock (a concurrent retry's report waits, then compares with this
    one); the audit keeps both reports. A succeeded one is never replaced."""
    approval = failed.approval
    with transaction.atomic():
        locked = ApprovalOutcome.objects.select_for_update().get(pk=failed.pk)
        if locked.status != ApprovalOutcome.Status.FAILED:
            return _same(locked, report["report_hash"])
        for name, value in report.items():
            setattr(locked, name, value)
        locked.reported_at = timezone.now()
        locked.save()
        event_record(
            action="effect.reported",
            actor=actor,
            run_id=approval.run_id,
            approval_id=approval.id,
            tool=approval.tool,
            data={
                "idempotency_key": report["idempotency_key"],
                "status": report["status"],
                "args_match": report["args_match"],
                "flags": report["flags"],
                "approval_status": approval.status,
                "executed_args_hash": report["executed_args_hash"],
                "after_failed_report": True,
            },
            private={"executed_args": report["executed_args"], "result": report["result"]},
            request=request,
        )
        outcome_stuck_clear(approval=approval)
    return locked


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
