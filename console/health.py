"""Readiness checks (``/readyz``): the database, the checkpointer, the broker, a live worker.

The worker check reads a heartbeat row that a django-q2 task writes every minute
(``console.tasks.worker_heartbeat``, a Schedule from console migration 0005), rather than
django-q2's own cluster stats: those live in the cache for 3 seconds under a key list that
every cluster rewrites without a lock (two clusters can drop each other's entry), are written
by the sentinel whether or not a worker can take a task, and vanish silently when the cache
culls. A task that ran proves the scheduler, the broker and a worker all work.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from console.models import WorkerHeartbeat

log = logging.getLogger(__name__)


def worker_heartbeat_record(*, now: dt.datetime | None = None) -> str:
    """This host's worker ran a task just now (one upsert)."""
    now = now or timezone.now()
    WorkerHeartbeat.objects.update_or_create(
        host=socket.gethostname()[:255], defaults={"pid": os.getpid(), "seen_at": now}
    )
    return f"heartbeat at {now.isoformat()}"


# A worker that takes a task proves itself alive too (at most every 30 s per process): the
# heartbeat task waits in the same queue as the runs' advances, behind any backlog.
TASK_BEAT_EVERY_SECONDS = 30.0
_task_beat = {"at": float("-inf")}


def worker_heartbeat_on_task(sender: Any = None, task: dict | None = None, **kwargs: Any) -> None:
    """django-q2's ``pre_execute``, in a worker about to run any task. A task run synchronously
    (Q_SYNC: in the web process itself) proves no worker. Never raises into the task."""
    if task is not None and task.get("sync"):
        return
    now = time.monotonic()
    if now - _task_beat["at"] < TASK_BEAT_EVERY_SECONDS:
        return
    _task_beat["at"] = now
    try:
        worker_heartbeat_record()
    except Exception:  # noqa: BLE001 - the heartbeat task tries again; the task must run
        log.warning("worker heartbeat not recorded", exc_info=True)


def check_database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return "ok"


def check_checkpointer() -> str:
    from agents.runtime.checkpoint import checkpointer_ready

    checkpointer_ready()
    return "ok"


def check_broker() -> str:
    """The ORM broker is the database (checked above); Redis answers PING."""
    if settings.Q_BROKER == "orm":
        check_database()
        return "ok (the database)"
    from django_q.brokers import get_broker

    if not get_broker().ping():
        raise RuntimeError("the broker did not answer PING")
    return "ok"


def check_worker(*, now: dt.datetime | None = None) -> str:
    now = now or timezone.now()
    last = WorkerHeartbeat.objects.order_by("-seen_at").values_list("seen_at", flat=True).first()
    if last is None:
        raise RuntimeError("no worker heartbeat yet: is a qcluster running?")
    age = (now - last).total_seconds()
    if age > settings.WORKER_HEARTBEAT_MAX_AGE_SECONDS:
        raise RuntimeError(
            f"last worker heartbeat {age:.0f} s ago "
            f"(more than {settings.WORKER_HEARTBEAT_MAX_AGE_SECONDS} s)"
        )
    return f"ok (heartbeat {age:.0f} s ago)"


CHECKS: dict[str, Callable[[], str]] = {
    "database": check_database,
    "checkpointer": check_checkpointer,
    "broker": check_broker,
    "worker": check_worker,
}


def readiness() -> tuple[bool, dict[str, Any]]:
    """(ready?, {check: {"ok": bool, "detail": text}}): every check runs, each on its own."""
    results: dict[str, Any] = {}
    for name, check in CHECKS.items():
        try:
            results[name] = {"ok": True, "detail": check()}
        except Exception as exc:  # noqa: BLE001 - a failing check is an answer, not an error
            results[name] = {"ok": False, "detail": f"{type(exc).__name__}: {exc}"[:500]}
    return all(r["ok"] for r in results.values()), results
