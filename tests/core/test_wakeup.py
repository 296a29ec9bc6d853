"""The ORM broker woken by Postgres NOTIFY (core/wakeup.py), and the settings that choose it.

The broker tests use committed rows (``transaction=True``): the waiting dequeue runs in its
own thread, on its own connections, as the cluster's pusher does in its own process.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections
from django.utils import timezone
from django_q.brokers.orm import ORM
from django_q.conf import Conf
from django_q.models import OrmQ

from core.wakeup import Listener, ListenNotifyORM, channel_for

ROOT = Path(__file__).resolve().parents[2]
LONG_POLL = 30.0  # far longer than any test may wait: returning at all proves it was woken

on_postgres = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="Postgres only: LISTEN/NOTIFY is what wakes this broker; SQLite keeps the stock "
    "ORM broker with a short poll (the settings tests below cover both)",
)


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Iterator[ListenNotifyORM]:
    monkeypatch.setattr(Conf, "ORM", "default")
    queue = ListenNotifyORM(list_key="test-wakeup")
    queue.purge_queue()
    yield queue
    queue._listener().close()
    queue.purge_queue()


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """What each Listener.wait returned (True: a NOTIFY woke it; False: the poll ran out)."""
    seen: list[bool] = []
    original = Listener.wait

    def recorded(self: Listener, timeout: float) -> bool:
        woke = original(self, timeout)
        seen.append(woke)
        return woke

    monkeypatch.setattr(Listener, "wait", recorded)
    return seen


class Dequeuer(threading.Thread):
    """Calls ``broker.dequeue()`` until it returns tasks (at most ``calls`` times)."""

    def __init__(self, broker: ListenNotifyORM, *, calls: int = 1) -> None:
        super().__init__(daemon=True)
        self.broker = broker
        self.calls = calls
        self.result: Any = None
        self.error: BaseException | None = None
        self.listening = threading.Event()

    def run(self) -> None:
        try:
            self.broker._listener().ensure()
            self.listening.set()
            for _ in range(self.calls):
                self.result = self.broker.dequeue()
                if self.result:
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            self.error = exc
        finally:
            self.listening.set()
            connections.close_all()


def result_of(thread: Dequeuer, *, timeout: float) -> Any:
    thread.join(timeout)
    assert not thread.is_alive(), f"dequeue still waiting after {timeout} s"
    if thread.error is not None:
        raise thread.error
    return thread.result


@pytest.fixture
def looked(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set once a dequeue has looked at the queue and found it empty."""
    empty_look = threading.Event()
    original = ListenNotifyORM._claim

    def recorded(self: ListenNotifyORM) -> list:
        tasks = original(self)
        if not tasks:
            empty_look.set()
        return tasks

    monkeypatch.setattr(ListenNotifyORM, "_claim", recorded)
    return empty_look


@on_postgres
@pytest.mark.django_db(transaction=True)
def test_an_enqueue_wakes_a_waiting_dequeue_before_its_poll_runs_out(
    broker, waits, looked, monkeypatch
):
    monkeypatch.setattr(Conf, "POLL", LONG_POLL)
    thread = Dequeuer(broker)
    thread.start()
    assert looked.wait(10)  # from here on the thread waits (or is about to) on its LISTEN
    task_id = broker.enqueue("signed-task")

    assert result_of(thread, timeout=LONG_POLL / 2) == [(task_id, "signed-task")]
    assert waits == [True]


@on_postgres
@pytest.mark.django_db(transaction=True)
def test_tasks_enqueued_in_bulk_wake_a_waiting_dequeue_with_one_notify(
    broker, waits, looked, monkeypatch
):
    monkeypatch.setattr(Conf, "POLL", LONG_POLL)
    monkeypatch.setattr(Conf, "BULK", 10)
    thread = Dequeuer(broker)
    thread.start()
    assert looked.wait(10)
    broker.enqueue_many(["first", "second", "third"])

    assert sorted(p for _, p in result_of(thread, timeout=LONG_POLL / 2)) == [
        "first",
        "second",
        "third",
    ]
    assert waits == [True]


@on_postgres
@pytest.mark.django_db(transaction=True)
def test_a_lost_notify_still_delivers_by_poll(broker, waits, monkeypatch):
    monkeypatch.setattr(Conf, "POLL", 0.2)
    # A row the first look cannot take yet and whose NOTIFY never comes (the stock broker
    # enqueues without one): it becomes due one second later, with nothing to wake the wait.
    task_id = ORM(list_key=broker.list_key).enqueue("signed-task")
    OrmQ.objects.filter(pk=task_id).update(lock=timezone.now() + dt.timedelta(seconds=1))
    thread = Dequeuer(broker, calls=50)
    thread.start()

    assert result_of(thread, timeout=20) == [(task_id, "signed-task")]
    assert waits and not any(waits)  # every wait ran out its poll; a look found the row


@on_postgres
@pytest.mark.django_db(transaction=True)
def test_a_broken_listen_connection_falls_back_to_the_poll_and_reconnects(broker, monkeypatch):
    monkeypatch.setattr(Conf, "POLL", 0.2)
    listener = broker._listener()
    assert listener.ensure()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [listener.conn.info.backend_pid])

    assert broker.dequeue() is None  # the wait notices the dead socket, polls, raises nothing
    task_id = broker.enqueue("signed-task")
    assert broker.dequeue() == [(task_id, "signed-task")]
    assert listener.conn is not None and not listener.conn.closed


@on_postgres
@pytest.mark.django_db(transaction=True)
def test_an_enqueue_inside_a_transaction_notifies_only_at_commit(broker):
    from django.db import transaction

    listener = broker._listener()
    assert listener.ensure()
    with transaction.atomic():
        broker.enqueue("signed-task")
        assert not listener.wait(0.2)  # uncommitted: no worker may see it yet
    assert listener.wait(5)


@on_postgres
@pytest.mark.django_db(transaction=True)
def test_a_task_is_claimed_by_one_of_two_listening_clusters(broker, monkeypatch):
    monkeypatch.setattr(Conf, "POLL", 2.0)
    other = ListenNotifyORM(list_key=broker.list_key)
    threads = [Dequeuer(broker, calls=2), Dequeuer(other, calls=2)]
    for thread in threads:
        thread.start()
        assert thread.listening.wait(10)
    task_id = broker.enqueue("signed-task")
    results = [result_of(thread, timeout=20) for thread in threads]
    other._listener().close()

    assert sorted(results, key=bool) == [None, [(task_id, "signed-task")]]


def test_a_long_queue_name_still_makes_a_valid_channel():
    assert channel_for("console") == "django_q_console"
    long_name = channel_for("q" * 200)
    assert len(long_name.encode()) <= 63
    assert long_name != channel_for("q" * 201)


def _q_cluster(**env: str) -> dict[str, Any]:
    code = "import django, json; django.setup(); from django.conf import settings; "
    code += "print(json.dumps(settings.Q_CLUSTER))"
    clean = {k: v for k, v in os.environ.items() if k not in ("Q_POLL", "Q_ORM_LISTEN")}
    clean.update(env, DJANGO_SETTINGS_MODULE="console.settings")
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/not_connected_to"
SQLITE_URL = "sqlite:////tmp/not-opened.sqlite3"


def test_the_orm_broker_on_postgres_listens():
    q_cluster = _q_cluster(DATABASE_URL=POSTGRES_URL, Q_BROKER="orm")
    assert q_cluster["broker_class"] == "core.wakeup.ListenNotifyORM"
    assert q_cluster["orm"] == "default"
    assert q_cluster["poll"] == 0.5


def test_listening_can_be_turned_off():
    q_cluster = _q_cluster(DATABASE_URL=POSTGRES_URL, Q_BROKER="orm", Q_ORM_LISTEN="false")
    assert "broker_class" not in q_cluster


def test_the_orm_broker_on_sqlite_polls_often():
    q_cluster = _q_cluster(DATABASE_URL=SQLITE_URL, Q_BROKER="orm")
    assert "broker_class" not in q_cluster
    assert q_cluster["poll"] == 0.1
    assert _q_cluster(DATABASE_URL=SQLITE_URL, Q_POLL="0.5")["poll"] == 0.5


def test_the_redis_broker_is_left_as_it_is():
    q_cluster = _q_cluster(DATABASE_URL=POSTGRES_URL, Q_BROKER="redis")
    assert "broker_class" not in q_cluster
    assert "orm" not in q_cluster


def test_a_bad_listen_value_names_the_variable():
    clean = dict(os.environ, DATABASE_URL=POSTGRES_URL, Q_ORM_LISTEN="sometimes")
    clean["DJANGO_SETTINGS_MODULE"] = "console.settings"
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "Q_ORM_LISTEN" in result.stderr.splitlines()[-1]
