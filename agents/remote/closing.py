"""Closing an external run's requests: each one whose approvals are all final gets its resume
value (``protocol.resume_value``), its audit and its signed callback; a cancelled run's are closed
as cancelled. The runner calls ``remote_run_advance`` for runs of agent ``external:*``."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from agents.hitl import protocol
from agents.remote.callbacks import callback_write
from agents.remote.connector_resume import connector_resume_run
from agents.remote.models import RemoteRequest
from approvals import services as approval_services
from approvals.models import AgentRun, ApprovalRequest
from approvals.services.outcomes import outcome_stuck_clear
from audit.services import event_record
from core.sealed_fields import field_seal


def remote_run_advance(*, run: AgentRun) -> str:
    """Close each pending request of an external run whose approvals are all final (its
    resume value, the audit, the signed callback); the run waits while any is pending, and
    runs ("in its own service") once none is. Safe to repeat: a closed request is skipped."""
    if run.cancel_requested or run.is_terminal:
        closed = remote_requests_cancel(run=run)
        # A connector agent's thread is told at once too (a reject of every action).
        if closed:
            connector_resume_run(run=run)
        return f"external: {closed} cancelled"
    decided = 0
    still_pending = 0
    for remote in RemoteRequest.objects.filter(run=run, status=RemoteRequest.Status.PENDING):
        approvals = list(
            ApprovalRequest.objects.filter(
                run=run, interrupt_id=remote.approval_interrupt_id
            ).order_by("action_index")
        )
        if not approvals or any(a.is_pending for a in approvals):
            still_pending += 1
            continue
        if _remote_decide(remote=remote, approvals=approvals):
            decided += 1
    # --- Hook (Part C): a connector agent (LangGraph Agent Server) resumes its thread here,
    # from each request just decided (remote.resume); never raises (errors on the connector).
    if decided:
        connector_resume_run(run=run)
    fresh = AgentRun.objects.get(pk=run.pk)
    if fresh.cancel_requested or fresh.is_terminal:
        return f"external: {decided} decided, run {fresh.status}"
    if still_pending:
        approval_services.run_mark_waiting(run=fresh)
        return f"external: {decided} decided, {still_pending} pending"
    if fresh.status == AgentRun.Status.WAITING:
        approval_services.run_mark_running(run=fresh, resumed=True)
    return f"external: {decided} decided"


def _remote_decide(*, remote: RemoteRequest, approvals: list[ApprovalRequest]) -> bool:
    decisions = [a.decision for a in approvals]
    resume = protocol.resume_value(value=remote.value, decisions=decisions)
    now = timezone.now()
    with transaction.atomic():
        moved = RemoteRequest.objects.filter(
            pk=remote.pk, status=RemoteRequest.Status.PENDING
        ).update(
            status=RemoteRequest.Status.DECIDED,
            decided_at=now,
            resume=field_seal(RemoteRequest, "resume", remote.run_id, resume),
        )
        if not moved:
            return False  # another advance closed it
        remote.status, remote.decided_at, remote.resume = RemoteRequest.Status.DECIDED, now, resume
        event_record(
            action="remote.decided",
            actor=f"agent:{remote.run_id}",
            run_id=remote.run_id,
            data={
                "request_id": str(remote.id),
                "interrupt_id": remote.interrupt_id,
                "approvals": {str(a.id): a.status for a in approvals},
            },
        )
        callback_write(remote=remote)
    return True


def remote_requests_cancel(*, run: AgentRun) -> int:
    """Close the pending requests of a cancelled run (status cancelled, with its callback)."""
    closed = 0
    for remote in RemoteRequest.objects.filter(run=run, status=RemoteRequest.Status.PENDING):
        with transaction.atomic():
            now = timezone.now()
            moved = RemoteRequest.objects.filter(
                pk=remote.pk, status=RemoteRequest.Status.PENDING
            ).update(status=RemoteRequest.Status.CANCELLED, decided_at=now)
            if not moved:
                continue
            remote.status, remote.decided_at = RemoteRequest.Status.CANCELLED, now
            event_record(
                action="remote.cancelled",
                actor=f"agent:{run.pk}",
                run_id=run.pk,
                data={"request_id": str(remote.id), "interrupt_id": remote.interrupt_id},
            )
            callback_write(remote=remote)
            # Told "cancelled", not the decision: an approved action has nothing to report.
            for approval in ApprovalRequest.objects.filter(
                run=run, interrupt_id=remote.approval_interrupt_id
            ).only("id", "run_id"):
                outcome_stuck_clear(approval=approval)
            closed += 1
    return closed
