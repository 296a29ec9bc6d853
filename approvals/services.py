"""Writes for runs and approvals. Each changes state and records its audit event in one
transaction (invariant 3)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django_q.tasks import async_task

from approvals.diff import args_diff
from approvals.models import AgentRun, ApprovalRequest
from approvals.permissions import user_may_decide
from approvals.schema import args_errors
from audit.canonical import payload_hash
from audit.services import event_record

RUN_ADVANCE_TASK = "agents.tasks.run_advance"


class DecisionError(Exception):
    status_code = 400

    def __init__(self, message: str, *, errors: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        self.errors = errors or {}


class DecisionInvalid(DecisionError):
    """Bad input (400); ``errors`` names the fields."""


class DecisionForbidden(DecisionError):
    status_code = 403


class DecisionConflict(DecisionError):
    """Already decided, expired, or the payload hash does not match (409)."""

    status_code = 409

    def __init__(self, message: str, *, reason: str, approval: ApprovalRequest):
        super().__init__(message)
        self.reason = reason
        self.approval = approval


def run_advance_enqueue(*, run_id: Any) -> None:
    """Queue an advance of the run once the current transaction commits."""
    transaction.on_commit(lambda: async_task(RUN_ADVANCE_TASK, str(run_id), group="runs"))


# --- runs --------------------------------------------------------------------------------


def run_create(
    *,
    agent: str,
    graph_version: str,
    input: dict[str, Any],
    requested_by: Any,
    request: Any = None,
) -> AgentRun:
    """A queued run plus its audit event; the advance is queued on commit."""
    with transaction.atomic():
        run = AgentRun(
            agent=agent, graph_version=graph_version, input=input, requested_by=requested_by
        )
        run.thread_id = str(run.id)
        run.save(force_insert=True)
        event_record(
            action="run.created",
            actor=requested_by,
            run_id=run.id,
            data={"agent": agent, "graph_version": graph_version, "input": input},
            request=request,
        )
        run_advance_enqueue(run_id=run.id)
    return run


def _run_transition(
    run: AgentRun, *, status: str, action: str, data: dict[str, Any] | None = None, **fields: Any
) -> AgentRun:
    with transaction.atomic():
        locked = AgentRun.objects.select_for_update().get(pk=run.pk)
        locked.status = status
        for name, value in fields.items():
            setattr(locked, name, value)
        if status in AgentRun.TERMINAL and locked.finished_at is None:
            locked.finished_at = timezone.now()
        locked.save()
        event_record(action=action, actor=f"agent:{locked.id}", run_id=locked.id, data=data or {})
    return locked


def run_mark_running(*, run: AgentRun, resumed: bool) -> AgentRun:
    fields: dict[str, Any] = {}
    if resumed:
        fields["resume_count"] = run.resume_count + 1
    action = "run.resumed" if resumed else "run.started"
    return _run_transition(run, status=AgentRun.Status.RUNNING, action=action, **fields)


def run_mark_waiting(*, run: AgentRun) -> AgentRun:
    if run.status == AgentRun.Status.WAITING:
        return run
    return _run_transition(run, status=AgentRun.Status.WAITING, action="run.waiting")


def run_mark_completed(*, run: AgentRun, output: dict[str, Any]) -> AgentRun:
    return _run_transition(
        run,
        status=AgentRun.Status.COMPLETED,
        action="run.completed",
        data={"output": output},
        output=output,
        lease_owner="",
        lease_expires_at=None,
    )


def run_mark_failed(*, run: AgentRun, error: str, dead: bool) -> AgentRun:
    status = AgentRun.Status.DEAD if dead else AgentRun.Status.FAILED
    return _run_transition(
        run,
        status=status,
        action=f"run.{status}",
        data={"error": error},
        error=error,
        lease_owner="",
        lease_expires_at=None,
    )


def run_record_failure(*, run: AgentRun, error: str, retry_in: float) -> AgentRun:
    """A retryable failure: count it and keep the run queued for another attempt."""
    return _run_transition(
        run,
        status=AgentRun.Status.QUEUED,
        action="run.retrying",
        data={
            "error": error,
            "retry_in_seconds": round(retry_in, 2),
            "failure_count": run.failure_count + 1,
        },
        error=error,
        failure_count=run.failure_count + 1,
        lease_owner="",
        lease_expires_at=None,
    )


def run_flag(*, run: AgentRun, reason: str) -> AgentRun:
    """Refuse to resume and say why (invariant 8); a person must look."""
    return _run_transition(
        run,
        status=run.status,
        action="run.flagged",
        data={"reason": reason},
        flag=reason,
        lease_owner="",
        lease_expires_at=None,
    )


def run_mark_cancelled(*, run: AgentRun, user: Any, request: Any = None) -> AgentRun:
    with transaction.atomic():
        locked = AgentRun.objects.select_for_update().get(pk=run.pk)
        if locked.is_terminal:
            return locked
        locked.cancel_requested = True
        locked.status = AgentRun.Status.CANCELLED
        locked.finished_at = timezone.now()
        locked.save()
        closed = list(
            locked.approvals.filter(status=ApprovalRequest.Status.PENDING).values_list(
                "id", flat=True
            )
        )
        locked.approvals.filter(id__in=closed).update(
            status=ApprovalRequest.Status.EXPIRED,
            decided_at=timezone.now(),
            decided_by_label="system:cancel",
            decision={"decision": "reject", "message": "run cancelled", "by": "system:cancel"},
        )
        event_record(
            action="run.cancelled",
            actor=user,
            run_id=locked.id,
            data={"closed_approvals": closed},
            request=request,
        )
    return locked


def run_budget_add(*, run: AgentRun, steps: int = 0, tokens: int = 0) -> None:
    """Persist spent budget after each step, so a resume never resets it."""
    from django.db.models import F

    AgentRun.objects.filter(pk=run.pk).update(
        steps_used=F("steps_used") + steps, tokens_used=F("tokens_used") + tokens
    )


# --- approvals -----------------------------------------------------------------------------


def approval_requests_sync(
    *, run: AgentRun, requests: list[dict[str, Any]]
) -> list[ApprovalRequest]:
    """One ApprovalRequest per pending interrupt action; creates only what is missing.

    Each item: interrupt_id, action_index, tool, args, payload, tier, allowed_decisions,
    expires_at (datetime). Unique (run, interrupt_id, action_index) makes a repeated advance
    create nothing twice.
    """
    created: list[ApprovalRequest] = []
    with transaction.atomic():
        existing = set(run.approvals.values_list("interrupt_id", "action_index"))
        for item in requests:
            if (item["interrupt_id"], item["action_index"]) in existing:
                continue
            approval = ApprovalRequest(
                run=run,
                interrupt_id=item["interrupt_id"],
                action_index=item["action_index"],
                tool=item["tool"],
                args=item["args"],
                payload=item["payload"],
                payload_hash=payload_hash(item["payload"]),
                tier=item["tier"],
                allowed_decisions=item["allowed_decisions"],
                expires_at=item["expires_at"],
            )
            try:
                with transaction.atomic():
                    approval.save(force_insert=True)
            except IntegrityError:
                continue  # created by a concurrent advance
            event_record(
                action="approval.requested",
                actor=f"agent:{run.id}",
                run_id=run.id,
                approval_id=approval.id,
                tool=approval.tool,
                data={
                    "interrupt_id": approval.interrupt_id,
                    "action_index": approval.action_index,
                    "tier": approval.tier,
                    "payload": approval.payload,
                    "payload_hash": approval.payload_hash,
                    "expires_at": approval.expires_at.isoformat(),
                },
            )
            created.append(approval)
    return created


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
) -> ApprovalRequest:
    """Decide once (invariant 5): row lock, payload-hash binding, single use."""
    allowed, reason = user_may_decide(user=user, approval=approval)
    if not allowed:
        raise DecisionForbidden(reason)
    resume_args = _decision_args(approval=approval, decision=decision, args=args, message=message)
    with transaction.atomic():
        locked = (
            ApprovalRequest.objects.select_for_update().select_related("run").get(pk=approval.pk)
        )
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
        value = {
            "decision": decision,
            "args": resume_args,
            "message": message,
            "by": user.get_username(),
            "approval_id": locked.id,
        }
        locked.status = ApprovalRequest.DECISION_STATUS[decision]
        locked.decided_by = user
        locked.decided_by_label = user.get_username()
        locked.decided_at = timezone.now()
        locked.decision = value
        locked.save(
            update_fields=["status", "decided_by", "decided_by_label", "decided_at", "decision"]
        )
        event_record(
            action="approval.decided",
            actor=user,
            run_id=locked.run_id,
            approval_id=locked.id,
            tool=locked.tool,
            data={
                "decision": decision,
                "role": _role(user),
                "shown": {"payload": locked.payload, "payload_hash": locked.payload_hash},
                "proposed_args": locked.args,
                "final_args": resume_args,
                "diff": args_diff(locked.args, resume_args) if decision == "edit" else {},
                "message": message,
                "note": note,
            },
            request=request,
        )
        run_advance_enqueue(run_id=locked.run_id)
    return locked


def _decision_args(
    *, approval: ApprovalRequest, decision: str, args: dict[str, Any] | None, message: str
) -> dict[str, Any]:
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
    errors = args_errors(schema=approval.payload.get("args_schema"), args=args)
    if errors:
        raise DecisionInvalid("The edited args are not valid.", errors=errors)
    return args


def _role(user: Any) -> str:
    if user.is_superuser:
        return "admin"
    groups = sorted(user.groups.values_list("name", flat=True))
    return ",".join(groups) if groups else "approver"


def approval_expires_at(*, seconds: int) -> dt.datetime:
    return timezone.now() + dt.timedelta(seconds=seconds)
