"""The Agent Server connector against a real local ``langgraph dev`` server: an interrupted
thread becomes one approval (however often the schedule polls), and once decided the thread is
resumed exactly once, with the approved (or edited) args reaching the tool."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.utils import timezone

from agents import tasks
from agents.remote import connector_resume
from agents.remote.connector_models import AgentServerConnector, ConnectorResume
from agents.remote.models import RemoteRequest
from agents.runtime import advance
from agents.services import run_cancel
from approvals.models import ApprovalRequest
from audit.models import AuditEvent
from tests.agents.remote.conftest import make_agent
from tests.support.agent_server import GRAPH_ID, AgentServer, agent_server_running
from tests.support.approvals import decide
from tests.support.processes import free_port

pytestmark = pytest.mark.django_db(transaction=True)

ASKED = {"order_id": "A-1", "amount": 30}


@pytest.fixture
def agent_server(tmp_path) -> Iterator[AgentServer]:
    """A real ``langgraph dev`` server serving tests/fixtures/agent_server (fresh per test)."""
    with agent_server_running(tmp_path) as server:
        yield server


def connector_for(url: str) -> AgentServerConnector:
    agent = make_agent("refunds-server", callback_url="")
    return AgentServerConnector.objects.create(
        name="local", url=url, graph_ids=[GRAPH_ID], agent=agent
    )


def poll() -> dict[str, Any]:
    return tasks.connectors_poll()["local"]


def settled(server: AgentServer, thread_id: str, *, timeout: float = 20.0) -> dict[str, Any]:
    """The thread once no run is going on it."""
    client = server.client()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        thread = client.threads.get(thread_id)
        if thread["status"] != "busy" and not client.runs.list(thread_id, status="pending"):
            return thread
        time.sleep(0.2)
    raise AssertionError(f"thread {thread_id} still busy after {timeout}s")


def test_an_interrupted_thread_is_asked_once_and_resumed_once_with_the_edited_args(
    agent_server, demo_policy, bob
):
    connector = connector_for(agent_server.url)
    thread_id = agent_server.start_thread(**ASKED)

    assert poll()["opened"] == 1
    assert poll()["opened"] == 0  # polling again creates nothing
    approval = ApprovalRequest.objects.get()
    remote = RemoteRequest.objects.get()
    assert remote.thread_id == thread_id
    assert remote.protocol == RemoteRequest.Protocol.LANGCHAIN_HITL
    assert (approval.tool, approval.args, approval.tier) == ("issue_refund", ASKED, "write")
    assert approval.run.requested_by == connector.agent.user  # four eyes: no person asked
    assert agent_server.calls() == []

    decide(approval, bob, "edit", args={"order_id": "A-1", "amount": 20})
    advance.run_advance(run_id=approval.run_id)  # the hook resumes the thread on the server
    thread = settled(agent_server, thread_id)

    assert thread["status"] == "idle"
    assert agent_server.calls() == [{"order_id": "A-1", "amount": 20}]
    resume = ConnectorResume.objects.get()
    assert resume.status == ConnectorResume.Status.DELIVERED and resume.server_run_id
    assert AuditEvent.objects.filter(action="remote.resumed", run_id=approval.run_id).count() == 1

    # Later passes (and another advance) deliver nothing twice and ask nothing new.
    advance.run_advance(run_id=approval.run_id)
    assert poll() == {"opened": 0, "resumed": 0, "errors": 0}
    settled(agent_server, thread_id)
    assert agent_server.calls() == [{"order_id": "A-1", "amount": 20}]
    assert ApprovalRequest.objects.count() == 1


def test_a_resume_that_failed_is_sent_by_a_later_poll_and_a_stale_claim_is_not_resent(
    agent_server, demo_policy, bob, monkeypatch
):
    connector = connector_for(agent_server.url)
    thread_id = agent_server.start_thread(**ASKED)
    poll()
    approval = ApprovalRequest.objects.get()
    decide(approval, bob, "approve")

    # The call to resume fails when the decision is advanced: recorded, not raised.
    real_client = connector_resume.connector_client

    def refusing_client(connector: AgentServerConnector) -> Any:
        client = real_client(connector)

        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise httpx.ConnectError("connection refused")

        client.runs.create = refuse
        return client

    with monkeypatch.context() as patch:
        patch.setattr(connector_resume, "connector_client", refusing_client)
        advance.run_advance(run_id=approval.run_id)
    connector.refresh_from_db()
    assert "connection refused" in connector.last_error
    failed = ConnectorResume.objects.get()
    assert (failed.status, failed.attempts) == (ConnectorResume.Status.FAILED, 1)
    assert agent_server.calls() == []

    # The schedule's catch-up takes the failed claim again and resumes the thread.
    assert poll()["resumed"] == 1
    assert ConnectorResume.objects.get().attempts == 2
    settled(agent_server, thread_id)
    assert agent_server.calls() == [ASKED]
    connector.refresh_from_db()
    assert connector.last_error == "" and connector.last_polled_at is not None

    # A crash between the call and its record leaves a stale "sending" claim: the thread no
    # longer waits on the interrupt, so it is settled as delivered without a second call.
    ConnectorResume.objects.update(
        status=ConnectorResume.Status.SENDING,
        claimed_at=timezone.now() - dt.timedelta(minutes=10),
    )
    assert poll()["resumed"] == 0
    resume = ConnectorResume.objects.get()
    assert resume.status == ConnectorResume.Status.DELIVERED
    assert resume.last_error == "not pending any more"
    assert agent_server.calls() == [ASKED]


def test_an_unreachable_deployment_is_recorded_on_the_connector_not_raised(db):
    connector = connector_for(f"http://127.0.0.1:{free_port()}")
    assert poll()["errors"] == 1
    connector.refresh_from_db()
    assert "ConnectError" in connector.last_error
    assert connector.last_polled_at is not None


def test_every_interrupted_thread_is_opened_in_bounded_pages_from_the_stored_offset(
    agent_server, demo_policy
):
    """max_threads=1: the server honours the offset over the oldest-first list, and threads
    already waiting on people do not hold back the others."""
    connector = connector_for(agent_server.url)
    threads = [agent_server.start_thread(order_id=f"A-{n}", amount=10 + n) for n in range(3)]
    AgentServerConnector.objects.filter(pk=connector.pk).update(
        max_threads=1, poll_offsets={GRAPH_ID: 2}
    )
    assert poll()["opened"] == 1
    assert set(RemoteRequest.objects.values_list("thread_id", flat=True)) == {threads[2]}
    assert AgentServerConnector.objects.get().poll_offsets == {GRAPH_ID: 2}  # opened: stays
    assert poll()["opened"] == 0  # a page of 2 from offset 2 holds 1: the end is seen
    assert AgentServerConnector.objects.get().poll_offsets == {GRAPH_ID: 0}
    assert [poll()["opened"] for _ in range(3)] == [1, 1, 0]
    assert set(RemoteRequest.objects.values_list("thread_id", flat=True)) == set(threads)


def test_a_run_cancelled_in_the_console_ends_its_thread_with_a_reject_not_the_approve(
    agent_server, demo_policy, bob, admin
):
    connector_for(agent_server.url)
    thread_id = agent_server.start_thread(**ASKED)
    poll()
    approval = ApprovalRequest.objects.get()
    run_cancel(run=approval.run, user=admin)
    advance.run_advance(run_id=approval.run_id)  # closes the request, tells the thread

    thread = settled(agent_server, thread_id)
    assert thread["status"] == "idle"  # the graph went on: it waits on nothing any more
    assert agent_server.calls() == []  # the tool never ran
    assert ConnectorResume.objects.get().status == ConnectorResume.Status.DELIVERED
    assert poll() == {"opened": 0, "resumed": 0, "errors": 0}
