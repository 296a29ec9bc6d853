"""Long polls take at most REMOTE_LONG_POLL_CONCURRENCY threads of a web process: beyond it a
poll answers at once (the request as it is) with Retry-After, so people keep their threads."""

from __future__ import annotations

import time

import pytest
from django.core.exceptions import ImproperlyConfigured
from rest_framework.test import APIClient

from agents.remote.api import LONG_POLL_BUSY_RETRY_SECONDS, long_poll_slots
from tests.agents.remote.helpers import open_request

URL = "/api/approval-requests/"


def agent_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {key}")
    return client


def test_a_long_poll_beyond_the_slots_answers_at_once_with_retry_after(
    demo_policy, agent, agent_key, settings
):
    settings.REMOTE_LONG_POLL_CONCURRENCY = 1
    remote, _ = open_request(agent)
    slots = long_poll_slots()
    assert slots.acquire(blocking=False)  # another agent's poll holds the only slot
    try:
        started = time.monotonic()
        answer = agent_client(agent_key).get(f"{URL}{remote.id}/", {"wait": 20})
        elapsed = time.monotonic() - started
    finally:
        slots.release()
    assert answer.status_code == 200 and answer.json()["status"] == "pending"
    assert answer["Retry-After"] == str(LONG_POLL_BUSY_RETRY_SECONDS)
    assert elapsed < 2


def test_a_long_poll_with_a_free_slot_waits_and_gives_it_back(
    demo_policy, agent, agent_key, settings
):
    settings.REMOTE_LONG_POLL_CONCURRENCY = 1
    remote, _ = open_request(agent)
    started = time.monotonic()
    answer = agent_client(agent_key).get(f"{URL}{remote.id}/", {"wait": 1})
    assert time.monotonic() - started >= 1
    assert "Retry-After" not in answer
    slots = long_poll_slots()
    assert slots.acquire(blocking=False)  # released after the poll
    slots.release()


def test_no_slots_means_every_poll_answers_at_once(demo_policy, agent, agent_key, settings):
    settings.REMOTE_LONG_POLL_CONCURRENCY = 0
    remote, _ = open_request(agent)
    answer = agent_client(agent_key).get(f"{URL}{remote.id}/", {"wait": 20})
    assert answer["Retry-After"] == str(LONG_POLL_BUSY_RETRY_SECONDS)


def test_the_concurrency_setting_is_read_strictly(monkeypatch):
    import importlib

    import console.settings_remote as module

    monkeypatch.setenv("REMOTE_LONG_POLL_CONCURRENCY", "-1")
    with pytest.raises(ImproperlyConfigured, match="REMOTE_LONG_POLL_CONCURRENCY"):
        importlib.reload(module)
    monkeypatch.setenv("REMOTE_LONG_POLL_CONCURRENCY", "two")
    with pytest.raises(ImproperlyConfigured, match="REMOTE_LONG_POLL_CONCURRENCY"):
        importlib.reload(module)
    monkeypatch.delenv("REMOTE_LONG_POLL_CONCURRENCY")
    assert importlib.reload(module).REMOTE_LONG_POLL_CONCURRENCY == 1
