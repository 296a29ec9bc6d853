"""Round 2: the long poll cap (REMOTE_LONG_POLL_CONCURRENCY) leaks no slot (guards: held)."""

from __future__ import annotations

from rest_framework.test import APIClient

from agents.remote import api
from tests.agents.remote.helpers import open_request

URL = "/api/approval-requests/"


def agent_client(key: str) -> APIClient:
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Agent {key}")
    return client


def test_a_poll_that_dies_while_waiting_gives_its_slot_back(
    demo_policy, agent, agent_key, settings, monkeypatch
):
    settings.REMOTE_LONG_POLL_CONCURRENCY = 1
    remote, _ = open_request(agent)

    def dies(seconds: float) -> None:
        raise ConnectionResetError("the worker was interrupted")

    monkeypatch.setattr(api.time, "sleep", dies)
    agent_client(agent_key).get(f"{URL}{remote.id}/", {"wait": 5})
    monkeypatch.undo()
    slots = api.long_poll_slots()
    assert slots.acquire(blocking=False), "the dead poll kept the only slot"
    slots.release()


def test_a_poll_without_wait_or_of_a_decided_request_takes_no_slot(
    demo_policy, agent, agent_key, settings
):
    settings.REMOTE_LONG_POLL_CONCURRENCY = 1
    remote, _ = open_request(agent)
    slots = api.long_poll_slots()
    assert slots.acquire(blocking=False)  # another poll holds the only slot
    try:
        answer = agent_client(agent_key).get(f"{URL}{remote.id}/", {"wait": 0})
        assert answer.status_code == 200 and "Retry-After" not in answer
        for wait in ("-1", "1.5", "31", "x", "1e3"):
            bad = agent_client(agent_key).get(f"{URL}{remote.id}/", {"wait": wait})
            assert bad.status_code == 400, (wait, bad.status_code)
    finally:
        slots.release()
