"""Writes for runs: create, the status transitions a worker makes, cancel, budget, flag, and
queueing an advance. Each records its audit event in the same transaction (invariant 3)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django_q.tasks import async_task

from approvals import contract
from approvals.models import AgentRun, ApprovalRequest
from approvals.rollups import approvals_rollup_add
from audit.services import event_record


class RunStopped(Exception):
    """The run was cancelled or finished while a worker held it; the worker must stop."""


class LeaseLostError(RunStopped):
    """The worker making a transition no longer holds the run's lease (invariant 14)."""


# The lease of the worker whose advance is making transitions in this context (set by the
# runner around an advance): each transition is then conditional on that lease.
_acting_lease: ContextVar[str | None] = ContextVar("acting_lease", default=None)


@contextmanager
def run_transitions_fenced(*, lease_owner: str) -> Iterator[None]:
    """Inside, every run transition requires that ``lease_owner`` still holds the lease: a
    worker that lost it (another took the run over) changes nothing."""
    token = _acting_lease.set(lease_owner)
    try:
        yield
    finally:
        _acting_lease.reset(token)


def run_advance_enqueue(*, run_id: Any) -> None:
    """Queue an advance of the run once the current transaction commits.

    The wake flag is set in the same transaction: a worker holding the run's lease at that
    moment sees it when it releases the lease and queues the run again, so a decision made
    while the run is busy is never lost.
    """
    AgentRun.objects.filter(pk=run_id).update(wake_requested=True)
    transaction.on_commit(lambda: async_task(contract.RUN_ADVANCE_TASK, str(run_id), group="runs"))


def run_create(
    *,
    agent: str,
    graph_version: str,
    input: dict[str, Any],
    requested_by: Any,
    request: Any = None,
    parent: AgentRun | None = None,
    forked_from_checkpoint: str = "",
    fork_data: dict[str, Any] | None = None,
) -> AgentRun:
    """A queued run plus its audit event ("run.created", or "run.forked" with a ``parent``);
    the advance is queued on commit."""
    with transaction.atomic():
        run = AgentRun(
            agent=agent,
            graph_version=graph_version,
            input=input,
            requested_by=requested_by,
            parent_run=parent,
            forked_from_checkpoint=forked_from_checkpoint,
        )
        run.thread_id = str(run.id)
        run.save(force_insert=True)
        if parent is None:
            action = "run.created"
            data = {"agent": agent, "graph_version": graph_version, "input": input}
        else:
            action = "run.forked"
            data = {
                "parent_run": str(parent.pk),
                "checkpoint_id": forked_from_checkpoint,
                **(fork_data or {}),
            }
        event_record(action=action, actor=requested_by, run_id=run.id, data=data, request=request)
        run_advance_enqueue(run_id=run.id)
    return run


def _run_transition(
    run: AgentRun, *, status: str, action: str, data: dict[str, Any] | None = None, **fields: Any
) -> AgentRun:
    with transaction.atomic():
        locked = AgentRun.objects.select_for_update().get(pk=run.pk)
        acting = _acting_lease.get()
        if acting is not None and locked.lease_owner != acting:
            raise LeaseLostError(f"worker {acting} no longer holds the lease of run {locked.pk}")
        if locked.status != status and (locked.cancel_requested or locked.is_terminal):
            # A cancel (or an end) that landed while a worker ran must not be overwritten.
            raise RunStopped(f"run {locked.pk} is {locked.status}; not moving it to {status}")
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


def run_mark_queued(*, run: AgentRun, reason: str, deferred_key: str = "") -> AgentRun:
    """Back to the queue to continue in a new task (the advance reached its deadline; with
    ``deferred_key``, the call under that key starts there)."""
    data = {"reason": reason, **({"deferred_key": deferred_key} if deferred_key else {})}
    return _run_transition(run, status=AgentRun.Status.QUEUED, action="run.continued", data=data)


def run_record_recovery(*, run: AgentRun, previous_owner: str) -> AgentRun:
    """An advance died mid-step (its worker was killed or timed out): it counts as a failure."""
    return _run_transition(
        run,
        status=AgentRun.Status.RUNNING,
        action="run.recovered",
        data={"previous_owner": previous_owner, "failure_count": run.failure_count + 1},
        failure_count=run.failure_count + 1,
    )


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


def _fits(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis (the audit event keeps it whole)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run_flag(*, run: AgentRun, reason: str) -> AgentRun:
    """Refuse to resume and say why (invariant 8); a person must look. The run waits for them
    (status waiting), so nothing takes it for a worker that died; ``run_unflag`` wakes it."""
    return _run_transition(
        run,
        status=AgentRun.Status.WAITING,
        action="run.flagged",
        data={"reason": reason},
        flag=_fits(reason, AgentRun._meta.get_field("flag").max_length),
        lease_owner="",
        lease_expires_at=None,
    )


def run_unflag(*, run: AgentRun, user: Any, reason: str, request: Any = None) -> AgentRun:
    """A person cleared what the run was flagged for; its next advance goes on."""
    with transaction.atomic():
        locked = AgentRun.objects.select_for_update().get(pk=run.pk)
        if not locked.flag:
            return locked
        previous = locked.flag
        locked.flag = ""
        locked.save(update_fields=["flag", "updated_at"])
        event_record(
            action="run.unflagged",
            actor=user,
            run_id=locked.id,
            data={"flag": previous, "reason": reason},
            request=request,
        )
        run_advance_enqueue(run_id=locked.id)
    return locked


def run_mark_cancelled(*, run: AgentRun, user: Any, request: Any = None) -> AgentRun:
    """Cancel the run and close its pending approvals as rejected by system:cancel."""
    with transaction.atomic():
        locked = AgentRun.objects.select_for_update().get(pk=run.pk)
        if locked.is_terminal:
            return locked
        locked.cancel_requested = True
        locked.status = AgentRun.Status.CANCELLED
        locked.finished_at = timezone.now()
        locked.save()
        pending = list(
            locked.approvals.filter(status=ApprovalRequest.Status.PENDING).only(
                "id", "args", "tier", "policy_version"
            )
        )
        now = timezone.now()
        for approval in pending:
            value = contract.decision_value(
                decision=ApprovalRequest.Decision.REJECT,
                args=approval.args,
                message="run cancelled",
                by=contract.CANCEL_ACTOR,
                approval_id=approval.id,
                tier=approval.tier,
                policy_version=approval.policy_version,
                decided_at=now,
            )
            locked.approvals.filter(pk=approval.pk).update(
                status=ApprovalRequest.Status.EXPIRED,
                decided_at=now,
                decided_by_label=contract.CANCEL_ACTOR,
                decision=value,
            )
        if pending:  # the metrics count them as expired, in this transaction
            closed = locked.approvals.filter(pk__in=[approval.pk for approval in pending])
            approvals_rollup_add(approvals=closed, agent=locked.agent)
        event_record(
            action="run.cancelled",
            actor=user,
            run_id=locked.id,
            data={"closed_approvals": [approval.id for approval in pending]},
            request=request,
        )
    return locked


def run_budget_add(*, run: AgentRun, steps: int = 0, tokens: int = 0) -> None:
    """Persist spent budget after each step, so a resume never resets it. A step done is
    progress: the failure budget counts failures since the last one (RUN_MAX_FAILURES)."""
    progress = {"failure_count": 0} if steps else {}
    AgentRun.objects.filter(pk=run.pk).update(
        steps_used=F("steps_used") + steps, tokens_used=F("tokens_used") + tokens, **progress
    )
