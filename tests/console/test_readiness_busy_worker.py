"""/readyz and a busy worker: the every-minute heartbeat task waits in the same queue as the
runs' advances, so a backlog longer than WORKER_HEARTBEAT_MAX_AGE_SECONDS must not make a
worker that is taking task after task look dead (and take the web out of its load balancer)."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.db import DatabaseError
from django.test import Client
from django_q.signals import pre_execute

from console import health, tasks

pytestmark = pytest.mark.django_db
T0 = dt.datetime(2030, 1, 1, 9, 0, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def no_recent_beat(monkeypatch):
    """This process has not beaten lately (the beat on taking a task is throttled)."""
    beat = getattr(health, "_task_beat", None)
    if beat is not None:
        monkeypatch.setitem(beat, "at", float("-inf"))


def worker_takes(task: dict) -> None:
    """What django-q2's worker sends before it runs each task it took from the queue."""
    pre_execute.send(sender="django_q", func=lambda: None, task=task)


def test_a_worker_working_through_a_backlog_stays_ready_while_its_heartbeat_task_waits(settings):
    settings.WORKER_HEARTBEAT_MAX_AGE_SECONDS = 180
    with time_machine.travel(T0, tick=False) as clock:
        tasks.worker_heartbeat()
        clock.shift(dt.timedelta(seconds=200))  # the next heartbeat task is still queued
        worker_takes({"id": "a1", "func": "agents.tasks.run_advance", "args": ("r",)})
        response = Client().get("/readyz")

    assert response.status_code == 200, response.json()


def test_a_task_run_synchronously_in_a_web_process_is_no_worker_heartbeat(settings):
    with time_machine.travel(T0, tick=False):
        worker_takes({"id": "a2", "func": "agents.tasks.run_advance", "sync": True})
        response = Client().get("/readyz")

    assert response.status_code == 503
    assert response.json()["failing"] == ["worker"]


def test_a_heartbeat_that_cannot_be_written_never_stops_the_task(monkeypatch):
    def unwritable(**kwargs):
        raise DatabaseError("the database is read-only")

    monkeypatch.setattr(health, "worker_heartbeat_record", unwritable)

    worker_takes({"id": "a3", "func": "agents.tasks.run_advance"})  # does not raise
