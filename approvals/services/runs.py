"""Writes for runs: create, the status transitions a worker makes, cancel, budget, flag, and
queueing an advance. Each records its audit event in the same transaction (invariant 3)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone
from django_q.tasks import async_task

from approvals import contract
from approvals.models import AgentRun, ApprovalRequest
from approvals.rollups import approvals_rollup_add
from approvals.tracing import approvals_wait_record
from audit.services import event_record
from core.sealed_fields import SealedJSONField, SealedTextField, field_seal
from core.sealing import datakey_scope

# AgentRun's sealed columns (core/sealed_fields.py).
_SEALED = frozenset(
    f.name
    for f in AgentRun._meta.concrete_fields
    if isinstance(f, (SealedJSONField, SealedTextField))
)


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


def run_advance_enqueue(*, run_id: Any, flagged: bool = False) -> None:
    """Queue an advance of the run once the current transaction commits.

    The wake flag is set in the same transaction: a worker holding the run's lease at that
    moment sees it when it releases the lease and queues the run again, so a decision made
    while the run is busy is never lost. ``flagged``: the caller already set it in this
    transaction (a new run's insert, a lease release that found it set).
    """
    if not flagged:
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
    thread_id: str = "",
    owner_group: Any = None,
    enqueue: bool = True,
) -> AgentRun:
    """A queued run plus its audit event ("run.created", or "run.forked" with a ``parent``);
    the advance is queued on commit. Its data key is made with its first sealed value.

    An external agent's run (agents/remote/) names its own ``thread_id`` and ``owner_group``
    and is not advanced (``enqueue=False``): its approval requests are opened by the caller."""
    with datakey_scope(), transaction.atomic():  # the key made for the input seals the rest
        run = AgentRun(
            agent=agent,
            graph_version=graph_version,
            input=input,
            requested_by=requested_by,
            parent_run=parent,
            forked_from_checkpoint=forked_from_checkpoint,
            owner_group=owner_group,
            wake_requested=enqueue,  # its advance is queued below, on commit
        )
        run.thread_id = thread_id or str(run.id)
        run.save(force_insert=True)
        private = None
        if parent is None:
            action = "run.created"
            data = {"agent": agent, "graph_version": graph_version}
            private = {"input": input}
        else:
            action = "run.forked"
            data = {
                "parent_run": str(parent.pk),
                "checkpoint_id": forked_from_checkpoint,
                **(fork_data or {}),
            }
        event_record(
            action=action,
            actor=requested_by,
            run_id=run.id,
            data=data,
            private=private,
            request=request,
        )
        if enqueue:
            run_advance_enqueue(run_id=run.id, flagged=True)
    return run


def _run_transition(
    run: AgentRun,
    *,
    status: str,
    action: str,
    data: dict[str, Any] | None = None,
    private: dict[str, Any] | None = None,
    **fields: Any,
) -> AgentRun:
    """Move the run to ``status`` and record ``action`` in the same transaction (``private``:
    the event's personal data, sealed under the run's key)."""
    with transaction.atomic():
        moved = run_move(run=run, status=status, **fields)
        event_record(
            action=action, actor=f"agent:{run.pk}", run_id=run.pk, data=data, private=private
        )
    return moved


def run_move(*, run: AgentRun, status: str, **fields: Any) -> AgentRun:
    """The write of a transition, for a caller that records its event in the same transaction:
    one conditional UPDATE (it takes the row lock). Raises LeaseLostError when the acting
    lease is gone, RunStopped over a cancel or an end that landed while a worker ran (unless
    the run already is in ``status``). Returns ``run`` as moved (a copy; the fields this
    transition did not set are as the caller read them)."""
    acting = _acting_lease.get()
    now = timezone.now()
    where = Q(pk=run.pk) & (
        Q(status=status) | (Q(cancel_requested=False) & ~Q(status__in=AgentRun.TERMINAL))
    )
    if acting is not None:
        where &= Q(lease_owner=acting)
    values: dict[str, Any] = {"status": status, "updated_at": now, **_sealed(run, fields)}
    if status in AgentRun.TERMINAL:
        values["finished_at"] = Coalesce(F("finished_at"), Value(now))
    if not AgentRun.objects.filter(where).update(**values):
        _transition_refused(run, status=status, acting=acting)
    moved = copy.copy(run)
    for name, value in {"status": status, "updated_at": now, **fields}.items():
        setattr(moved, name, value)
    if status in AgentRun.TERMINAL and moved.finished_at is None:
        moved.finished_at = now
    return moved


def _sealed(run: AgentRun, fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with the personal data (output, error) sealed under the run's key: an
    ``update()`` has no instance to seal through, and refuses plaintext."""
    return {
        name: field_seal(AgentRun, name, run.pk, value) if name in _SEALED else value
        for name, value in fields.items()
    }


def _transition_refused(run: AgentRun, *, status: str, acting: str | None) -> None:
    """Why the conditional UPDATE moved nothing, as the error the worker stops on."""
    locked = AgentRun.objects.only("lease_owner", "status", "cancel_requested").get(pk=run.pk)
    if acting is not None and locked.lease_owner != acting:
        raise LeaseLostError(f"worker {acting} no longer holds the lease of run {locked.pk}")
    raise RunStopped(f"run {locked.pk} is {locked.status}; not moving it to {status}")


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
        private={"output": output},
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
        private={"error": error},
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
        data={"retry_in_seconds": round(retry_in, 2), "failure_count": run.failure_count + 1},
        private={"error": error},
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
        locked.save(update_fields=["cancel_requested", "status", "finished_at", "updated_at"])
        pending = list(
            locked.approvals.filter(status=ApprovalRequest.Status.PENDING).only(
                "id", "run_id", "tool", "args", "tier", "policy_version", "created_at"
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
                decision=field_seal(ApprovalRequest, "decision", locked.id, value),
            )
            approval.status, approval.decided_at = ApprovalRequest.Status.EXPIRED, now
            approval.decision = value
        approvals_wait_record(
            approvals=pending, decision=ApprovalRequest.Decision.REJECT, role=contract.CANCEL_ACTOR
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


@dataclass(frozen=True)
class RunProgress:
    """A run's counters and stop signals as one budget update left them."""

    steps_used: int
    tokens_used: int
    cancel_requested: bool
    lease_owner: str


def run_budget_add(
    *, run: AgentRun, steps: int = 0, tokens: int = 0, tokens_at_least: int = 0
) -> RunProgress | None:
    """Persist spent budget after each step, so a resume never resets it, and read back what
    the runner checks between steps (counters, cancel, lease) in the same statement.

    ``tokens_used`` becomes ``max(tokens_used + tokens, tokens_at_least)`` (graphs that keep a
    cumulative count in their state are the source of truth). A step done is progress: the
    failure budget counts failures since the last one (RUN_MAX_FAILURES). None: no such run.
    """
    table = connection.ops.quote_name(AgentRun._meta.db_table)
    greatest = "GREATEST" if connection.vendor == "postgresql" else "MAX"  # SQLite: scalar max
    progress = ", failure_count = 0" if steps else ""
    pk = AgentRun._meta.pk.get_db_prep_value(run.pk, connection)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET steps_used = steps_used + %s,"
            f" tokens_used = {greatest}(tokens_used + %s, %s){progress}"
            " WHERE id = %s RETURNING steps_used, tokens_used, cancel_requested, lease_owner",
            [int(steps), int(tokens), int(tokens_at_least), pk],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    return RunProgress(
        steps_used=row[0], tokens_used=row[1], cancel_requested=bool(row[2]), lease_owner=row[3]
    )
