"""Waking many runs at once (the sweep's expiries, recovery): one UPDATE, one queue transaction.

``run_advance_enqueue`` (``runs``) wakes one run. Queued one by one from the sweep, each task
cost about 9 ms on Postgres: outside a transaction django-q2's ORM broker calls
``close_old_connections()`` before every enqueue, which with ``CONN_MAX_AGE=0`` closes the
connection and opens a new one. Here ``async_task`` builds the same packages (signed, the same
options, the same ``pre_enqueue`` signal) and they reach the broker in one batch, so the
cluster and the tests' recorded queue (``tests/support/queue.py`` patches ``async_task`` here
too) see nothing new.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.brokers.orm import ORM
from django_q.conf import Conf
from django_q.models import OrmQ
from django_q.tasks import async_task

from approvals import contract
from approvals.models import AgentRun

# Runs woken per UPDATE (bounded IN lists: SQLite allows 32,766 variables, Postgres more).
_CHUNK = 1000


def tasks_enqueue_many(func: str, arguments: Sequence[tuple[Any, ...]], *, group: str) -> int:
    """Queue ``func(*args)`` for each of ``arguments`` in one batch; returns how many.

    Each package is built by ``async_task`` itself (signed, with the cluster's options), handed
    to a stand-in broker that keeps it; then the packages go to the real broker together: one
    multi-row INSERT per 500 with django-q2's ORM broker (and one NOTIFY with
    ``core.wakeup.ListenNotifyORM``), one broker (one connection) and, for
    an ORM-backed one, one transaction otherwise. Call it outside a transaction of yours (on
    commit). In sync mode (``Q_SYNC``) each task runs inline, one by one.
    """
    if not arguments:
        return 0
    if Conf.SYNC:
        for args in arguments:
            async_task(func, *args, group=group)
        return len(arguments)
    broker = get_broker()
    kept = _Kept(list_key=broker.list_key)
    for args in arguments:
        async_task(func, *args, group=group, broker=kept)
    _push(broker, kept.packages)
    return len(arguments)


class _Kept:
    """Stands in for the broker inside ``async_task``: keeps each signed package."""

    def __init__(self, *, list_key: str) -> None:
        self.list_key = list_key
        self.packages: list[str] = []

    def enqueue(self, package: str) -> int:
        self.packages.append(package)
        return len(self.packages)


def _push(broker: Any, packages: list[str]) -> None:
    if not packages:
        return
    enqueue_many = getattr(broker, "enqueue_many", None)
    if enqueue_many is not None:  # core.wakeup's ORM broker: one INSERT and one NOTIFY
        enqueue_many(packages)
        return
    if type(broker) is ORM:  # exactly django-q2's: a subclass may do more per task
        now = timezone.now()
        key = broker.list_key or Conf.CLUSTER_NAME  # as ORM.enqueue does
        rows = [OrmQ(key=key, payload=package, lock=now) for package in packages]
        OrmQ.objects.using(Conf.ORM).bulk_create(rows, batch_size=500)
        return
    # Outside a transaction the ORM broker reconnects before every enqueue (see the docstring).
    together = transaction.atomic(using=Conf.ORM) if Conf.ORM else contextlib.nullcontext()
    with together:
        for package in packages:
            broker.enqueue(package)


def runs_advance_enqueue_many(*, run_ids: Iterable[Any], touch: bool = False) -> int:
    """Queue an advance of each run once the current transaction commits (``run_advance_enqueue``
    for many: the wake flags in one UPDATE per thousand runs, the tasks in one batch).

    ``touch`` also moves ``updated_at`` to now: recovery takes the runs least recently touched
    first, so a bounded pass leaves the ones it just queued for last next time.
    """
    ids = [str(pk) for pk in dict.fromkeys(run_ids)]
    if not ids:
        return 0
    arguments = [(run_id,) for run_id in ids]
    update: dict[str, Any] = {"wake_requested": True}
    if touch:
        update["updated_at"] = timezone.now()
    with transaction.atomic():
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            AgentRun.objects.filter(pk__in=chunk).update(**update)
        transaction.on_commit(
            lambda: tasks_enqueue_many(contract.RUN_ADVANCE_TASK, arguments, group="runs")
        )
    return len(ids)
