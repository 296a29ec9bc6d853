"""django-q2's ORM broker, woken by Postgres LISTEN/NOTIFY instead of sleeping a whole poll.

The stock ORM broker's ``dequeue`` looks for a task and, finding none, sleeps ``Q_POLL``
seconds: a task enqueued just after a look waits the whole poll (0.5 s by default) before a
worker sees it, twice per run (start, decision). This broker sends ``NOTIFY`` after each
enqueue, and its ``dequeue`` waits on a ``LISTEN`` connection with the poll as the timeout, so
a new task is taken at once while the idle cost stays one look per poll.

Why nothing is lost: NOTIFY is transactional, so it reaches listeners only once the task's row
is committed (``async_task`` runs in ``on_commit``; one called inside a transaction notifies at
its commit). The LISTEN is in place before each look, so a task committed between the look
and the wait still wakes the wait. A NOTIFY that never arrives (the listening connection broke,
the database restarted) costs at most one poll: the look after the timeout finds the task, as
the stock broker would. Tasks that come back after ``Q_RETRY`` (their worker died) are found
by that same poll, as before.

Selected in console/settings.py when the ORM broker runs on Postgres (``Q_ORM_LISTEN``).
"""

from __future__ import annotations

import hashlib
import logging
import os
from time import sleep
from typing import Any

from django.db import connections, transaction
from django.utils import timezone
from django_q.brokers.orm import ORM
from django_q.conf import Conf
from django_q.models import OrmQ

logger = logging.getLogger(__name__)

CHANNEL_PREFIX = "django_q_"
_CHANNEL_MAX = 63  # Postgres identifiers (and so channels) hold at most 63 bytes


def channel_for(list_key: str) -> str:
    """The NOTIFY channel of a queue: readable when short, hashed when the name is too long."""
    channel = f"{CHANNEL_PREFIX}{list_key}"
    if len(channel.encode()) <= _CHANNEL_MAX:
        return channel
    return f"{CHANNEL_PREFIX}{hashlib.sha256(list_key.encode()).hexdigest()[:40]}"


class Listener:
    """One autocommit psycopg connection LISTENing on a channel, owned by one process."""

    def __init__(self, *, alias: str, channel: str) -> None:
        self.alias = alias
        self.channel = channel
        self.conn: Any = None
        self.pid = os.getpid()

    def ensure(self) -> bool:
        """LISTEN if not already; False (and the caller polls) when the database refuses."""
        if self.pid != os.getpid():
            # A forked child must not use (or close) its parent's socket: start its own.
            self.conn, self.pid = None, os.getpid()
        if self.conn is not None and not self.conn.closed:
            return True
        import psycopg
        from psycopg import sql

        params = connections[self.alias].get_connection_params()
        try:
            self.conn = psycopg.connect(**params, autocommit=True)
            self.conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
        except psycopg.Error:
            logger.warning("LISTEN %s failed; polling until it works", self.channel, exc_info=True)
            self.close()
            return False
        return True

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for a NOTIFY; True if one came. Drains the ones queued."""
        import psycopg

        try:
            woke = any(True for _ in self.conn.notifies(timeout=timeout, stop_after=1))
            if woke:  # several enqueues while we were busy need one look, not one each
                for _ in self.conn.notifies(timeout=0):
                    pass
        except psycopg.Error:
            logger.warning("LISTEN %s lost; polling until it is back", self.channel, exc_info=True)
            self.close()
            sleep(timeout)
            return False
        return woke

    def close(self) -> None:
        if self.conn is not None and self.pid == os.getpid():
            try:
                self.conn.close()
            except Exception:  # noqa: BLE001 - a broken socket closes with an error; it is gone
                logger.debug("closing the LISTEN connection failed", exc_info=True)
        self.conn = None


class ListenNotifyORM(ORM):
    """The ORM broker plus NOTIFY on enqueue and a LISTEN-bounded wait in dequeue."""

    @staticmethod
    def get_connection(list_key: str | None = None) -> Any:
        """The queue's rows, on a connection kept open while it works.

        The stock broker calls ``close_old_connections()`` on every look, and with
        ``CONN_MAX_AGE = 0`` that means a new database connection per look, per claim and per
        acknowledgement, and an enqueue in ``on_commit`` closes the request's own connection.
        Here only a connection that has failed is replaced; the pusher holds one connection
        (beside its LISTEN one) and a request's connection still closes when the request ends.
        """
        connection = connections[Conf.ORM]
        if connection.errors_occurred and not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()
        return OrmQ.objects.using(Conf.ORM)

    @property
    def channel(self) -> str:
        return channel_for(self.list_key or Conf.CLUSTER_NAME)

    def enqueue(self, task: str) -> Any:
        package_id = super().enqueue(task)
        with connections[Conf.ORM].cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [self.channel])
        return package_id

    def enqueue_many(self, packages: list[str]) -> None:
        """Many tasks in one multi-row INSERT per 500 and one NOTIFY (wake-ups in bulk)."""
        now = timezone.now()
        rows = [
            OrmQ(key=self.list_key or Conf.CLUSTER_NAME, payload=package, lock=now)
            for package in packages
        ]
        with transaction.atomic(using=Conf.ORM):
            OrmQ.objects.using(Conf.ORM).bulk_create(rows, batch_size=500)
            with connections[Conf.ORM].cursor() as cursor:
                cursor.execute("SELECT pg_notify(%s, '')", [self.channel])

    def dequeue(self) -> list[tuple[Any, str]] | None:
        listener = self._listener()
        listening = listener.ensure()  # before the look, so a task committed after it wakes us
        tasks = self._claim()
        if tasks:
            return tasks
        if not listening:
            sleep(Conf.POLL)
            return None
        if listener.wait(Conf.POLL):
            return self._claim() or None
        return None

    def _listener(self) -> Listener:
        listener = getattr(self, "_wakeup_listener", None)
        if listener is None:
            listener = self._wakeup_listener = Listener(alias=Conf.ORM, channel=self.channel)
        return listener

    def _claim(self) -> list[tuple[Any, str]]:
        """The stock ORM broker's look-and-lock, without its sleep."""
        tasks = self.get_connection().filter(key=self.list_key, lock__lt=timezone.now())[
            0 : Conf.BULK
        ]
        claimed = []
        for task in tasks:
            # A conditional write: another cluster that was faster leaves 0 rows to update.
            if (
                self.get_connection()
                .filter(id=task.id, lock=task.lock)
                .update(lock=self.timeout(task))
            ):
                claimed.append((task.pk, task.payload))
        return claimed
