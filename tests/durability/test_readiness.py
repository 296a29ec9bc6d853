"""/readyz with a real qcluster: ready once its worker ran the heartbeat task, not ready once
the worker is gone (SIGKILL) and its last heartbeat grew old."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.conf import settings
from django.test import Client
from django.utils import timezone

from console.models import WorkerHeartbeat
from tests.support.processes import poll_until

pytestmark = [pytest.mark.durability, pytest.mark.django_db(transaction=True)]


def readyz():
    response = Client().get("/readyz")
    return response.status_code, response.json()


def test_readiness_follows_the_worker_heartbeat_and_fails_when_the_worker_is_gone(processes):
    status, body = readyz()
    assert (status, body["failing"]) == (503, ["worker"])  # no worker ever ran
    worker = processes.worker()
    # django-q2's scheduler looks every 30 s: the heartbeat schedule runs at its first look.
    seen = poll_until(
        lambda: WorkerHeartbeat.objects.first(),
        timeout=90,
        what="the qcluster's first heartbeat",
        processes=[worker],
    )
    status, body = readyz()
    assert status == 200, body
    worker.kill()  # SIGKILL: nothing more is written
    # Read after the kill: each task a worker takes also beats (the schedules due at the
    # scheduler's first look run together), so the row may have moved since ``seen``.
    last = WorkerHeartbeat.objects.get().seen_at
    assert last >= seen.seen_at
    stale = last + dt.timedelta(seconds=settings.WORKER_HEARTBEAT_MAX_AGE_SECONDS + 5)
    with time_machine.travel(max(stale, timezone.now()), tick=False):
        status, body = readyz()
    assert status == 503
    assert body["failing"] == ["worker"]
    assert WorkerHeartbeat.objects.get().seen_at == last
