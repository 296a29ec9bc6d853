"""The connector's pass is bounded and starves no thread: threads waiting on people are not
counted against ``max_threads``, and a page of threads that cannot be opened (refused tools)
moves the stored offset on, back to the oldest once the end is seen. The Agent Server is a
fake honouring limit and offset over the oldest-first list, as the real one does."""

from __future__ import annotations

from typing import Any

import pytest

from agents.remote import connector as connector_module
from agents.remote.connector import connector_poll
from agents.remote.connector_models import AgentServerConnector
from agents.remote.models import RemoteRequest
from approvals.models import AgentRun
from tests.agents.remote.conftest import make_agent

pytestmark = pytest.mark.django_db


def hitl(tool: str = "refund_order") -> dict[str, Any]:
    return {
        "action_requests": [{"name": tool, "args": {"order_id": "o-1", "amount": 20}}],
        "review_configs": [{"action_name": tool, "allowed_decisions": ["approve"]}],
    }


class Threads:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.searches: list[tuple[int, int]] = []

    def search(self, *, status, metadata, limit, sort_by, sort_order, offset=0):
        assert (sort_by, sort_order) == ("updated_at", "asc")
        self.searches.append((limit, offset))
        found = [t for t in self.rows if t["status"] == status]
        return [dict(t) for t in found[offset : offset + limit]]

    def add(self, thread_id: str, value: dict[str, Any]) -> None:
        self.rows.append(
            {
                "thread_id": thread_id,
                "status": "interrupted",
                "metadata": {"graph_id": "agent"},
                "interrupts": {"task": [{"id": "i-1", "value": value}]},
            }
        )


@pytest.fixture
def threads(monkeypatch) -> Threads:
    fake = Threads()
    client = type("Client", (), {"threads": fake, "runs": None})()
    monkeypatch.setattr(connector_module, "connector_client", lambda connector: client)
    return fake


def poll(connector: AgentServerConnector) -> dict[str, Any]:
    return connector_poll(connector=AgentServerConnector.objects.get(pk=connector.pk))


def opened() -> set[str]:
    return set(RemoteRequest.objects.values_list("thread_id", flat=True))


@pytest.fixture
def connector(demo_policy) -> AgentServerConnector:
    agent = make_agent("refunds-server", callback_url="")
    agent.tools = ["refund_order"]
    agent.save()
    return AgentServerConnector.objects.create(
        name="local",
        url="https://agents.example",
        graph_ids=["agent"],
        agent=agent,
        max_threads=2,
    )


def test_refused_threads_at_the_head_do_not_hold_the_newer_ones_back(connector, threads):
    for n in range(3):
        threads.add(f"t-refused-{n}", hitl("drop_database"))
    threads.add("t-fine-1", hitl())
    threads.add("t-fine-2", hitl())
    for _ in range(4):
        poll(connector)
    assert opened() == {"t-fine-1", "t-fine-2"}
    assert all(limit <= 2 + RemoteRequest.objects.count() for limit, _ in threads.searches)
    assert "drop_database" in AgentServerConnector.objects.get().last_error


def test_the_offset_moves_on_past_a_page_with_nothing_to_open_and_wraps_at_the_end(
    connector, threads
):
    threads.add("t-refused-1", hitl("drop_database"))
    threads.add("t-refused-2", hitl("drop_database"))
    threads.add("t-refused-3", hitl("drop_database"))
    poll(connector)
    assert AgentServerConnector.objects.get().poll_offsets == {"agent": 2}
    poll(connector)  # one left after the offset: the end was seen
    assert AgentServerConnector.objects.get().poll_offsets == {"agent": 0}
    assert threads.searches == [(2, 0), (2, 2)]
    threads.add("t-fine", hitl())
    poll(connector)
    poll(connector)
    assert opened() == {"t-fine"}


def test_threads_waiting_on_people_are_read_but_not_counted_nor_opened_again(connector, threads):
    for n in range(5):
        threads.add(f"t-{n}", hitl())
    assert poll(connector)["opened"] == 2
    assert poll(connector)["opened"] == 2
    assert poll(connector)["opened"] == 1
    assert poll(connector)["opened"] == 0
    assert len(opened()) == 5 == AgentRun.objects.count()
    assert threads.searches == [(2, 0), (4, 0), (6, 0), (7, 0)]


def test_a_password_in_the_url_is_neither_audited_nor_kept_in_the_error(connector, threads):
    """A URL stored with credentials before the form refused them: stripped or redacted."""
    from agents.remote.connector_registry import connector_state

    url = "https://svc:hunter2@agents.example/api"
    AgentServerConnector.objects.filter(pk=connector.pk).update(url=url, api_key="lsv2_key")

    def broken(**kwargs: Any) -> None:
        raise RuntimeError(f"401 for url {url} with key lsv2_key")

    threads.search = broken  # type: ignore[method-assign]
    assert poll(connector)["errors"] == 1
    stored = AgentServerConnector.objects.get()
    assert "hunter2" not in stored.last_error and "lsv2_key" not in stored.last_error
    assert connector_state(stored)["url"] == "https://agents.example/api"
