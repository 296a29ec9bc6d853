"""Failures of an advance: classify, retry with backoff and jitter, then dead-letter to a person.

429/5xx/timeouts/connection trouble are worth another try; 4xx and validation are not. After
RUN_MAX_FAILURES the run is dead and an escalation event carries its full context.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import traceback
import uuid
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents.effects.errors import ToolError, call_may_have_acted, call_transient_errors
from agents.runtime.budget import BudgetExceeded
from agents.runtime.checkpoint import CheckpointerNotReady
from agents.runtime.spans import dead_letter_event
from approvals import services as approval_services
from approvals.models import AgentRun
from audit.services import event_record

log = logging.getLogger(__name__)


def _infrastructure_errors() -> tuple[type[BaseException], ...]:
    """Errors of the database, the checkpointer's pool and the broker: worth another try."""
    import sqlite3

    import psycopg
    import psycopg_pool
    import redis.exceptions
    from django import db

    return (
        db.OperationalError,
        db.InterfaceError,
        psycopg.OperationalError,
        psycopg.InterfaceError,
        psycopg_pool.PoolTimeout,
        sqlite3.OperationalError,
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
    )


# Model providers' transient errors, matched anywhere in the exception's class hierarchy (their
# SDKs are optional, so they are known by name; a subclass counts as its base).
PROVIDER_RETRYABLE = {
    "RateLimitError",
    "APITimeoutError",
    "APIConnectionError",
    "InternalServerError",
    "ServiceUnavailableError",
}


def is_retryable(exc: BaseException) -> bool:
    """429/5xx/timeouts/connection trouble are worth another try; 4xx and validation are not.

    By the exception hierarchy: a ``RetryableToolError`` (``ToolTimeout`` included), Python's
    ``TimeoutError``/``ConnectionError`` and the HTTP clients' timeouts and connection errors
    (``effects.errors``), infrastructure errors, a provider's transient error,
    or any error carrying an HTTP status of 429 or 5xx.
    """
    if isinstance(exc, (*call_may_have_acted(), *call_transient_errors(), CheckpointerNotReady)):
        return True
    if isinstance(exc, _infrastructure_errors()):
        return True
    if any(cls.__name__ in PROVIDER_RETRYABLE for cls in type(exc).__mro__):
        return True
    status = (
        getattr(exc, "status_code", None)
        or getattr(getattr(exc, "response", None), "status_code", None)
        or (exc.status if isinstance(exc, ToolError) else None)
    )
    return isinstance(status, int) and (status == 429 or status >= 500)


def backoff_seconds(failures: int) -> float:
    """Exponential backoff with full jitter."""
    base = min(60.0, 2.0**failures)
    return random.uniform(base / 2, base)


def failure_record(run: AgentRun, exc: Exception) -> str:
    """Count the failure: retry later, or mark the run dead/failed and escalate."""
    try:
        return _failure_record(run, exc)
    except approval_services.RunStopped:
        return "stopped: the run was cancelled or finished meanwhile"


def _failure_record(run: AgentRun, exc: Exception) -> str:
    run = AgentRun.objects.get(pk=run.pk)
    error = f"{type(exc).__name__}: {exc}"
    detail = "".join(traceback.format_exception(exc))[-4000:]
    retryable = is_retryable(exc) and not isinstance(exc, BudgetExceeded)
    # The message may quote the run's data (a tool's answer, its args): it goes to the run's
    # sealed error and the audit trail, never to the log or the task's result (both kept in
    # the clear, outside erasure): those name the exception's type and the run only.
    kind = type(exc).__name__
    log.warning("run %s failed (%s): %s", run.pk, "retryable" if retryable else "final", kind)
    if retryable and run.failure_count + 1 < settings.RUN_MAX_FAILURES:
        delay = backoff_seconds(run.failure_count + 1)
        approval_services.run_record_failure(run=run, error=error, retry_in=delay)
        _enqueue_later(run.pk, delay)
        return f"retrying in {delay:.1f}s: {kind} (run {run.pk})"
    dead = retryable or not isinstance(exc, BudgetExceeded)
    _escalate(
        run,
        error=error,
        detail=detail,
        dead=dead,
        failures=run.failure_count + 1,
        retryable=retryable,
    )
    return f"{'dead' if dead else 'failed'}: {kind} (run {run.pk})"


def _escalate(
    run: AgentRun, *, error: str, detail: str, dead: bool, failures: int, retryable: bool
) -> None:
    """End the run (dead or failed) and hand it to a person with its full context."""
    with transaction.atomic():
        approval_services.run_mark_failed(
            run=run, error=f"{error}\n\n{detail}" if detail else error, dead=dead
        )
        event_record(
            action="run.escalated",
            actor=f"agent:{run.pk}",
            run_id=run.pk,
            data={"failures": failures, "retryable": retryable, "agent": run.agent},
            private={
                "error": error,
                "input": run.input,
                **({"traceback": detail} if detail else {}),
            },
        )
    if dead:  # on the advance's segment span (runtime.spans)
        dead_letter_event(run, error=error, failures=failures, retryable=retryable)


def recovery_record(run: AgentRun) -> str | None:
    """The previous advance of ``run`` died mid-step (its worker was killed, or django-q2's task
    timeout killed it): count it as a failure. Returns the outcome when that made the run dead
    (escalated), None when the run may go on."""
    previous = getattr(run, "previous_lease_owner", "") or "(released without finishing)"
    try:
        run = approval_services.run_record_recovery(run=run, previous_owner=previous)
    except approval_services.RunStopped:
        return "stopped: the run was cancelled or finished meanwhile"
    if run.failure_count < settings.RUN_MAX_FAILURES:
        return None
    error = (
        f"WorkerDied: the advance died mid-step {run.failure_count} times "
        f"(last held by {previous}); a step may outlast the task timeout"
    )
    _escalate(run, error=error, detail="", dead=True, failures=run.failure_count, retryable=True)
    return f"dead: WorkerDied (run {run.pk})"


def _enqueue_later(run_id: Any, delay: float) -> None:
    from django_q.models import Schedule
    from django_q.tasks import schedule

    transaction.on_commit(
        lambda: schedule(
            approval_services.RUN_ADVANCE_TASK,
            str(run_id),
            schedule_type=Schedule.ONCE,
            repeats=-1,  # django-q2 deletes a one-off schedule after its run only with -1
            next_run=timezone.now() + dt.timedelta(seconds=delay),
            name=f"retry-{run_id}-{uuid.uuid4().hex[:6]}",
        )
    )
