"""A connector agent's run cancelled in the console: its Agent Server thread is told, once, with
a reject of every action in the interrupt's protocol (never the decision); a thread deleted on
the server settles its requests; and an approve the connector delivered is never an unreported
outcome (the graph on the Agent Server has no way to report one)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx
import pytest
from django.utils import timezone
from langgraph_sdk.errors import NotFoundError

from agents.hitl import protocol
from agents.remote import connector_resume
from agents.remote.connector import _known_waiting, connector_poll
from agents.remote.connector_models import AgentServerConnector, ConnectorResume
from agents.remote.models import RemoteRequest
from agents.runtime import advance
from agents.services import run_cancel
from approvals.models import AgentRun, StuckItem
from approvals.services.stuck import stuck_sweep
from audit.models import AuditEvent
from tests.agents.remote.conftest import make_agent
from tests.agents.remote.helpers import console_payload, hitl, open_request, refund
from tests.agents.remote.test_agent_inbox_remote import REQUEST as INBOX_REQUEST
from tests.support.approvals import decide
from tests.support.people import client_for

pytestmark = pytest.mark.django_db

TWO_CALLS = {
    "action_requests": [
        {"name": "refund_order", "args": refund(10)},
        {"name": "refund_order", "args": refund(20, order_id="o-2")},
    ],
    "review_configs": [{"action_name": "refund_order", "allowed_decisions": ["approve"]}],
}


class Server:
    """An Agent Server whose threads wait on the interrupts of the requests opened here."""

    def __init__(self) -> None:
        self.pending: dict[str, list[str]] = {}
        self.gone: set[str] = set()
        self.created: list[tuple[str, dict[str, Any]]] = []
        self.fail = False
        self.threads, self.runs = self, self

    def get(self, thread_id: str) -> dict[str, Any]:
        if thread_id in self.gone:
            request = httpx.Request("GET", f"https://agents.example/threads/{thread_id}")
            response = httpx.Response(404, request=request)
            raise NotFoundError("not found", response=response, body=None)
        ids = self.pending.get(thread_id, [])
        return {
            "thread_id": thread_id,
            "status": "interrupted" if ids else "idle",
            "metadata": {"graph_id": "agent"},
            "interrupts": {"task": [{"id": i, "value": {}} for i in ids]},
        }

    def create(self, thread_id: str, assistant_id: str, *, command: dict[str, Any]):
        if self.fail:
            raise httpx.ConnectError("the deployment is down")
        self.created.append((thread_id, command))
        self.pending[thread_id] = []
        return {"run_id": f"r-{len(self.created)}"}

    def search(self, **kwargs: Any) -> list[dict[str, Any]]:
        return []


@pytest.fixture
def server(monkeypatch) -> Server:
    fake = Server()
    monkeypatch.setattr(connector_resume, "connector_client", lambda connector: fake)
    monkeypatch.setattr("agents.remote.connector.connector_client", lambda connector: fake)
    return fake


@pytest.fixture
def connector(demo_policy) -> AgentServerConnector:
    return AgentServerConnector.objects.create(
        name="local",
        url="https://agents.example",
        graph_ids=["agent"],
        agent=make_agent("refunds-server", callback_url=""),
    )


def opened(connector, server: Server, value: Any, thread_id: str = "t-1"):
    remote, approvals = open_request(connector.agent, value, thread_id=thread_id)
    server.pending[thread_id] = [remote.interrupt_id]
    return remote, approvals


def cancel(remote: RemoteRequest, admin) -> None:
    run_cancel(run=AgentRun.objects.get(pk=remote.run_id), user=admin)
    advance.run_advance(run_id=remote.run_id)


def test_a_cancelled_run_resumes_its_thread_once_with_a_reject_of_every_call(
    connector, server, admin, bob
):
    remote, approvals = opened(connector, server, TWO_CALLS)
    decide(approvals[0], bob)  # an approve of one call never reaches the thread
    cancel(remote, admin)

    message = connector_resume.CANCELLED_MESSAGE
    rejected = {"type": "reject", "message": message}
    assert server.created == [
        ("t-1", {"resume": {"i-1": {"decisions": [rejected, rejected]}}}),
    ]
    claim = ConnectorResume.objects.get(remote=remote)
    assert claim.status == ConnectorResume.Status.DELIVERED and claim.server_run_id == "r-1"
    event = AuditEvent.objects.get(action="remote.resumed", run_id=remote.run_id)
    assert event.data["cancelled"] is True
    # Later passes and advances tell it nothing more; nothing waits any more.
    advance.run_advance(run_id=remote.run_id)
    assert connector_poll(connector=connector)["resumed"] == 0
    assert len(server.created) == 1
    assert _known_waiting(connector) == 0


def test_a_cancel_the_server_did_not_take_is_told_by_a_later_pass(connector, server, admin):
    remote, _ = opened(connector, server, hitl())
    server.fail = True
    cancel(remote, admin)
    assert ConnectorResume.objects.get(remote=remote).status == ConnectorResume.Status.FAILED
    assert _known_waiting(connector) == 1  # its thread still waits on the server
    server.fail = False
    assert connector_poll(connector=connector)["resumed"] == 1
    [(_, command)] = server.created
    assert command["resume"]["i-1"]["decisions"][0]["type"] == "reject"


@pytest.mark.parametrize(
    ("value", "told"),
    [
        (INBOX_REQUEST, {"type": "ignore", "args": None}),
        ([INBOX_REQUEST], [{"type": "ignore", "args": None}]),
        (
            console_payload(),
            {"decision": "reject", "message": connector_resume.CANCELLED_MESSAGE},
        ),
    ],
    ids=["agent inbox", "agent inbox list", "console payload"],
)
def test_a_cancel_is_told_in_the_interrupts_own_protocol(value, told):
    assert protocol.reject_value(value=value, message=connector_resume.CANCELLED_MESSAGE) == told


def test_a_thread_deleted_on_the_server_settles_its_requests(connector, server, admin):
    remote, _ = opened(connector, server, hitl())
    server.gone.add("t-1")
    cancel(remote, admin)
    claim = ConnectorResume.objects.get(remote=remote)
    assert (claim.status, claim.last_error) == (
        ConnectorResume.Status.DELIVERED,
        "thread not found",
    )
    assert server.created == []
    assert _known_waiting(connector) == 0


def test_an_approve_the_connector_delivered_is_never_an_unreported_outcome(connector, server, bob):
    remote, [approval] = opened(connector, server, hitl())
    server.fail = True  # not delivered yet: the thread never got it, that is stuck
    decide(approval, bob)
    advance.run_advance(run_id=remote.run_id)
    stuck_sweep(now=timezone.now() + dt.timedelta(days=1))
    item = StuckItem.objects.get(kind=StuckItem.Kind.OUTCOME_NOT_REPORTED, key=str(approval.pk))

    server.fail = False
    connector_poll(connector=connector)  # delivered: the graph goes on, with nothing to report
    assert ConnectorResume.objects.get(remote=remote).status == ConnectorResume.Status.DELIVERED
    stuck_sweep(now=timezone.now() + dt.timedelta(days=2))
    item.refresh_from_db()
    assert item.cleared_at is not None
    assert not StuckItem.objects.filter(
        kind=StuckItem.Kind.OUTCOME_NOT_REPORTED, cleared_at__isnull=True
    ).exists()


def test_the_approval_page_says_a_delivered_connector_decision_reports_no_outcome(
    connector, server, bob
):
    remote, [approval] = opened(connector, server, hitl())
    server.fail = True
    decide(approval, bob)
    advance.run_advance(run_id=remote.run_id)
    page = client_for(bob).get(f"/approvals/{approval.pk}/").content.decode()
    assert 'data-outcome="awaited"' in page  # not delivered yet
    server.fail = False
    connector_poll(connector=connector)
    page = client_for(bob).get(f"/approvals/{approval.pk}/").content.decode()
    assert 'data-outcome="unreportable"' in page and 'data-outcome="awaited"' not in page
