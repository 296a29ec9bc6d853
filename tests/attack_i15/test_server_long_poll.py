"""Attack on the long poll: ``GET /api/approval-requests/{id}/?wait=N`` sleeps in a web
thread. The default web server has 2 processes x 4 threads (console/management/commands/
serve.py): eight agents polling take every thread, and no person can load a page or decide
(the decision that would end the polls waits behind them)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from agents.remote.registry import external_agent_key_issue
from approvals.services import policy_seed_demo
from tests.agents.remote.conftest import make_agent
from tests.support.fixtures import ProcessSet, processes  # noqa: F401

pytestmark = [pytest.mark.durability, pytest.mark.django_db(transaction=True)]

# More polls than the default server has threads (2 x 4).
POLLS = 10
WAIT = 10


def test_agents_long_polling_never_starve_the_people_using_the_console(
    processes: ProcessSet,  # noqa: F811
):
    policy_seed_demo()
    agent = make_agent("poller")
    key = external_agent_key_issue(agent=agent, actor="system:test")[1]
    web = processes.web()
    headers = {"Authorization": f"Agent {key}"}
    with httpx.Client(base_url=web.base_url, headers=headers, timeout=30) as client:
        opened = client.post(
            "/api/approval-requests/",
            json={"thread_id": "t", "interrupt_id": "i", "value": {"question": "?"}},
        )
        assert opened.status_code == 201, opened.text
        request_id = opened.json()["id"]

    def poll(_: int) -> int:
        with httpx.Client(base_url=web.base_url, headers=headers, timeout=WAIT + 20) as c:
            return c.get(f"/api/approval-requests/{request_id}/", params={"wait": WAIT}).status_code

    with ThreadPoolExecutor(POLLS) as pool:
        polls = [pool.submit(poll, i) for i in range(POLLS)]
        time.sleep(1.5)  # every poll is in its wait
        started = time.monotonic()
        try:
            login = httpx.get(f"{web.base_url}/login/", timeout=WAIT + 20)
        finally:
            waited = time.monotonic() - started
        assert [p.result() for p in polls] == [200] * POLLS
    assert login.status_code == 200
    # A person's page answers at once, not after the agents' polls.
    assert waited < 3, f"the login page took {waited:.1f}s behind {POLLS} long polls"
