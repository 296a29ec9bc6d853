"""Round 2: the connector's paging and a cancelled connector run. The Agent Server is the fake
of tests/agents/remote/test_connector_paging.py (limit and offset over the oldest first)."""

from __future__ import annotations

from typing import Any

import pytest

from agents.remote import connector_resume
from agents.remote.connector_models import AgentServerConnector
from agents.remote.models import RemoteRequest
from agents.runtime import advance
from agents.services import run_cancel
from approvals.models import AgentRun
from tests.agents.remote.test_connector_paging import (  # noqa: F401
    Threads,
    connector,
    hitl,
    opened,
    poll,
    threads,
)

pytestmark = pytest.mark.django_db


class Runs:
    def __init__(self) -> None:
        self.created: list[tuple[str, dict[str, Any]]] = []
        self.cancelled: list[str] = []

    def create(self, thread_id, assistant_id, *, command=None, **kwargs):
        self.created.append((thread_id, command or {}))
        return {"run_id": "r-1"}

    def cancel(self, thread_id, run_id=None, **kwargs):
        self.cancelled.append(thread_id)


def test_old_cancelled_requests_never_let_a_refused_thread_starve_a_new_one(
    connector,  # noqa: F811
    threads,  # noqa: F811
    admin,
    monkeypatch,
):
    """Requests whose threads the Agent Server no longer lists (cancelled in the console, then
    the thread ended there) are still counted as "waiting" forever: the page grows past the
    list, is never full, the offset stays 0, and with max_threads=1 a refused thread at the
    head is the only one ever tried."""
    AgentServerConnector.objects.filter(pk=connector.pk).update(max_threads=1)
    # The cancels below tell each thread (a reject) through this stand-in server, not through a
    # real client retrying an unreachable host for seconds each.
    client = type("Client", (), {"threads": threads, "runs": Runs()})()
    threads.get = lambda thread_id: next(  # type: ignore[attr-defined]
        dict(t) for t in threads.rows if t["thread_id"] == thread_id
    )
    monkeypatch.setattr(connector_resume, "connector_client", lambda connector: client)
    for n in range(3):
        threads.add(f"t-old-{n}", hitl())
        poll(connector)
    for run in AgentRun.objects.all():
        run_cancel(run=run, user=admin)
        advance.run_advance(run_id=run.pk)
    assert set(RemoteRequest.objects.values_list("status", flat=True)) == {"cancelled"}
    threads.rows.clear()  # those threads ended on the Agent Server (deleted, or resumed there)

    threads.add("t-refused", hitl("drop_database"))
    threads.add("t-fine", hitl())
    for _ in range(5):
        poll(connector)
    assert "t-fine" in opened(), threads.searches


def test_a_cancelled_connector_run_tells_its_agent_server_thread(
    connector,  # noqa: F811
    threads,  # noqa: F811
    admin,
    monkeypatch,
):
    """docs/remote.md: cancel "tells the agent cancelled". A connector agent is told only by
    a resume of its thread: without one the thread waits on the Agent Server forever."""
    runs = Runs()
    client = type("Client", (), {"threads": threads, "runs": runs})()
    threads.get = lambda thread_id: next(  # type: ignore[attr-defined]
        dict(t) for t in threads.rows if t["thread_id"] == thread_id
    )
    monkeypatch.setattr(connector_resume, "connector_client", lambda connector: client)
    threads.add("t-1", hitl())
    poll(connector)
    run = AgentRun.objects.get()
    run_cancel(run=run, user=admin)
    advance.run_advance(run_id=run.pk)
    assert RemoteRequest.objects.get().status == RemoteRequest.Status.CANCELLED
    for _ in range(2):
        poll(connector)
    told = [t for t, _ in runs.created] + runs.cancelled
    assert "t-1" in told, "the Agent Server thread still waits on a cancelled approval"
    for _thread, command in runs.created:
        # Told to stop, never to run the action.
        decisions = (command.get("resume") or {}).get("i-1", {}).get("decisions", [])
        assert all(d.get("type") != "approve" for d in decisions)
