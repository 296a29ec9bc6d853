"""The Agent Server connector against a scripted Agent Server (the SDK client patched at its
one patch point, ``connector_client``): every interrupted thread gets its request, a poison
thread does not stop the others, and the API key goes nowhere but the deployment."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from agents.remote import connector as connector_module
from agents.remote import connector_resume
from agents.remote.connector import connector_poll
from agents.remote.connector_models import AgentServerConnector, ConnectorResume
from agents.remote.models import RemoteRequest
from approvals.models import AgentRun
from tests.agents.remote.conftest import make_agent


def hitl_value(amount: Any = 20) -> dict[str, Any]:
    args = {"order_id": "o-1", "amount": amount, "reason": "damaged", "sku": "S-1"}
    return {
        "action_requests": [{"name": "refund_order", "args": args}],
        "review_configs": [{"action_name": "refund_order", "allowed_decisions": ["approve"]}],
    }


class FakeServer:
    """threads.search honours status, limit and the oldest-first sort, as the server does."""

    def __init__(self) -> None:
        self.threads: list[dict[str, Any]] = []
        self.created: list[tuple[str, str, dict[str, Any]]] = []

    def search(self, *, status, metadata, limit, sort_by, sort_order) -> list[dict[str, Any]]:
        found = [t for t in self.threads if t["status"] == status]
        return [dict(t) for t in found[:limit]]

    def get(self, thread_id: str) -> dict[str, Any]:
        return dict(next(t for t in self.threads if t["thread_id"] == thread_id))

    def create(self, thread_id: str, assistant: str, *, command: dict[str, Any]) -> dict:
        self.created.append((thread_id, assistant, command))
        return {"run_id": f"run-{len(self.created)}"}

    def add(self, thread_id: str, value: Any, interrupt_id: str = "i-1") -> None:
        self.threads.append(
            {
                "thread_id": thread_id,
                "status": "interrupted",
                "metadata": {"graph_id": "agent"},
                "interrupts": {"task": [{"id": interrupt_id, "value": value}]},
            }
        )


class _Client:
    def __init__(self, server: FakeServer) -> None:
        self.threads = server
        self.runs = server


@pytest.fixture
def server(monkeypatch) -> FakeServer:
    fake = FakeServer()
    monkeypatch.setattr(connector_module, "connector_client", lambda connector: _Client(fake))
    monkeypatch.setattr(connector_resume, "connector_client", lambda connector: _Client(fake))
    return fake


def make_connector(**fields: Any) -> AgentServerConnector:
    agent = make_agent("refunds-server", callback_url="")
    fields.setdefault("url", "https://agents.example")
    return AgentServerConnector.objects.create(
        name="local", graph_ids=["agent"], agent=agent, **fields
    )


def opened_threads() -> set[str]:
    return set(RemoteRequest.objects.values_list("thread_id", flat=True))


def test_a_new_interrupt_gets_its_request_while_older_threads_wait_on_people(demo_policy, server):
    """max_threads reads only the oldest interrupted threads; those already waiting on a
    person stay interrupted, so a busy deployment never opens its newer threads' requests."""
    connector = make_connector(max_threads=2)
    server.add("t-old-1", hitl_value())
    server.add("t-old-2", hitl_value())
    connector_poll(connector=connector)
    assert opened_threads() == {"t-old-1", "t-old-2"}
    server.add("t-new", hitl_value())  # nobody has decided the old ones yet
    for _ in range(3):
        connector_poll(connector=AgentServerConnector.objects.get(pk=connector.pk))
    assert "t-new" in opened_threads(), "the newer interrupted thread never got a request"


def test_a_poison_interrupt_does_not_stop_the_other_threads(demo_policy, server):
    """A tool arg with a NUL character (the model copied it from user input): the row cannot
    be stored on Postgres; the other threads must still be opened and decided ones resumed."""
    connector = make_connector()
    server.add("t-poison", hitl_value(amount="20\u0000"))
    server.add("t-fine", hitl_value())
    connector_poll(connector=connector)
    assert "t-fine" in opened_threads(), AgentServerConnector.objects.get(
        pk=connector.pk
    ).last_error


def test_a_forbidden_tool_is_an_error_of_its_thread_only(demo_policy, server):
    """Held: a thread asking about a tool outside agent.tools is reported and skipped."""
    connector = make_connector()
    connector.agent.tools = ["refund_order"]
    connector.agent.save()
    bad = hitl_value()
    bad["action_requests"][0]["name"] = "drop_database"
    server.add("t-bad", bad)
    server.add("t-fine", hitl_value())
    counts = connector_poll(connector=connector)
    assert opened_threads() == {"t-fine"}
    assert counts["errors"] == 1


def test_credentials_in_the_deployment_url_are_not_shown_to_reviewers(demo_policy, server):
    """The run's input (shown on its pages, to every reviewer) carries the connector's URL."""
    connector = make_connector(url="https://svc:hunter2@agents.example")
    server.add("t-1", hitl_value())
    connector_poll(connector=connector)
    run = AgentRun.objects.get()
    assert "hunter2" not in str(run.input)


def test_a_stale_claim_after_a_crash_is_not_sent_again_once_the_thread_moved_on(
    demo_policy, server, bob
):
    """Held: the console died after runs.create and before marking the claim delivered; the
    thread no longer waits on the interrupt, so a later pass settles it without a 2nd resume."""
    from agents.runtime import advance
    from approvals.models import ApprovalRequest
    from tests.support.approvals import decide

    connector = make_connector()
    server.add("t-1", hitl_value())
    connector_poll(connector=connector)
    remote = RemoteRequest.objects.get()
    approval = ApprovalRequest.objects.get(run_id=remote.run_id)
    server.create = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("crash"))  # type: ignore[method-assign]
    decide(approval, bob, "approve")
    advance.run_advance(run_id=remote.run_id)
    claim = ConnectorResume.objects.get()
    # Pretend the crash happened after the server accepted the run: sending, long ago.
    ConnectorResume.objects.filter(pk=claim.pk).update(
        status=ConnectorResume.Status.SENDING,
        claimed_at=timezone.now() - dt.timedelta(hours=1),
    )
    server.threads[0].update(status="idle", interrupts={})
    del server.create
    connector_poll(connector=AgentServerConnector.objects.get(pk=connector.pk))
    assert server.created == []
    assert ConnectorResume.objects.get().status == ConnectorResume.Status.DELIVERED


def test_pointing_a_connector_at_another_url_does_not_carry_its_api_key_there(demo_policy):
    """Someone who may change connectors but never saw the key moves the URL to a host they
    control and clicks "Poll now": the stored key must not follow (re-enter it, or keep the URL)."""
    from agents.remote.connector_admin import AgentServerConnectorForm

    connector = make_connector(api_key="lsv2_secret_key")
    form = AgentServerConnectorForm(
        data={
            "name": connector.name,
            "url": "https://attacker.example",
            "graph_ids": '["agent"]',
            "agent": connector.agent_id,
            "is_active": "on",
            "max_threads": "50",
            "api_key": "",
        },
        instance=connector,
    )
    if form.is_valid():
        saved = form.save()
        assert saved.api_key != "lsv2_secret_key", "the key now goes to https://attacker.example"
    else:
        assert "api_key" in form.errors or "url" in form.errors
