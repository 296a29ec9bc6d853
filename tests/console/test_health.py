"""/healthz (the process answers) and /readyz (database, checkpointer, broker, a live worker)."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.db import OperationalError, connections
from django.test import Client
from django_q.models import Schedule

from console import tasks
from console.models import WorkerHeartbeat

T0 = dt.datetime(2030, 1, 1, 9, 0, tzinfo=dt.UTC)


def readyz(client: Client | None = None):
    response = (client or Client()).get("/readyz")
    return response.status_code, response.json()


def test_healthz_answers_without_touching_the_database():
    # No django_db mark: any query would raise "Database access not allowed".
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_is_ok_with_a_recent_worker_heartbeat_and_fails_once_it_is_stale(settings):
    settings.WORKER_HEARTBEAT_MAX_AGE_SECONDS = 180
    with time_machine.travel(T0, tick=False) as clock:
        tasks.worker_heartbeat()  # what the qcluster runs every minute
        clock.shift(dt.timedelta(seconds=170))
        status, body = readyz()
        assert status == 200, body
        assert body["failing"] == []
        assert set(body["checks"]) == {"database", "checkpointer", "broker", "worker"}
        assert body["checks"]["worker"]["detail"] == "ok (heartbeat 170 s ago)"
        clock.shift(dt.timedelta(seconds=20))  # the worker is gone: no heartbeat for 190 s
        status, body = readyz()
    assert status == 503
    assert body["status"] == "unavailable"
    assert body["failing"] == ["worker"]
    assert "190 s ago" in body["checks"]["worker"]["detail"]


@pytest.mark.django_db
def test_readyz_fails_before_any_worker_ran():
    status, body = readyz()
    assert status == 503
    assert body["failing"] == ["worker"]
    assert "no worker heartbeat" in body["checks"]["worker"]["detail"]


@pytest.mark.django_db
def test_readyz_names_the_database_when_it_cannot_be_reached(monkeypatch):
    tasks.worker_heartbeat()

    def unreachable(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(connections["default"], "cursor", unreachable)
    status, body = readyz()
    assert status == 503
    assert "database" in body["failing"]
    assert "checkpointer" not in body["failing"]  # its own connection still works
    # The ORM broker and the heartbeat live in that database too.
    assert {"broker", "worker"} <= set(body["failing"])
    assert "connection refused" in body["checks"]["database"]["detail"]


@pytest.mark.django_db
def test_readyz_names_the_checkpointer_when_its_tables_are_not_ready(monkeypatch):
    from agents.runtime import checkpoint

    tasks.worker_heartbeat()

    def not_ready():
        raise checkpoint.CheckpointerNotReady("the checkpoint tables are at migration None")

    monkeypatch.setattr(checkpoint, "checkpointer_get", not_ready)
    status, body = readyz()
    assert status == 503
    assert body["failing"] == ["checkpointer"]


@pytest.mark.django_db
def test_readyz_tells_the_reasons_only_to_those_who_may_scrape_metrics():
    status, body = readyz(Client(REMOTE_ADDR="10.9.8.7"))
    assert status == 503
    assert body["failing"] == ["worker"]
    assert body["checks"]["worker"] == {"ok": False}


@pytest.mark.django_db
def test_the_heartbeat_keeps_one_row_per_host():
    with time_machine.travel(T0, tick=False) as clock:
        tasks.worker_heartbeat()
        clock.shift(dt.timedelta(minutes=1))
        tasks.worker_heartbeat()
    assert WorkerHeartbeat.objects.count() == 1
    assert WorkerHeartbeat.objects.get().seen_at == T0 + dt.timedelta(minutes=1)


@pytest.mark.django_db
def test_the_heartbeat_is_installed_as_a_schedule_every_minute():
    schedule = Schedule.objects.get(func="console.tasks.worker_heartbeat")
    assert (schedule.schedule_type, schedule.minutes, schedule.repeats) == ("I", 1, -1)
