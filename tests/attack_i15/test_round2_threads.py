"""Round 2: ``POST /api/approval-requests/threads/finish/``: bodies the product must refuse
with a clear 400 (never a 500), races with the advance closing a decision, and a finished
run's approvals."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from agents.remote import threads
from agents.remote.models import RemoteRequest
from agents.runtime import advance
from approvals.models import AgentRun, ApprovalRequest
from audit.verify import chain_verify_db
from tests.agents.remote.helpers import hitl, open_request
from tests.support.approvals import decide
from tests.support.people import client_for, rest_client_for

URL = "/api/approval-requests/"
FINISH = URL + "threads/finish/"


def agent_client(key: str) -> APIClient:
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Agent {key}")
    return client


def opened_and_decided(agent, bob) -> RemoteRequest:
    remote, approvals = open_request(agent)
    decide(approvals[0], bob)
    advance.run_advance(run_id=remote.run_id)
    remote.refresh_from_db()
    assert remote.status == RemoteRequest.Status.DECIDED
    return remote


@pytest.mark.parametrize(
    "output",
    [
        {"text": "a\u0000b"},  # Postgres jsonb holds no NUL
        "INF",  # the text 1e400 parses to inf: not JSON, not RFC 8785
        {"total": 2**70},  # beyond any double: the audit cannot hash it exactly
        {"k\u0000": 1},
    ],
    ids=["nul-value", "infinity", "huge-int", "nul-key"],
)
def test_a_finish_output_that_cannot_be_stored_or_hashed_gets_400_naming_output(
    demo_policy, agent, agent_key, bob, admin, output
):
    remote = opened_and_decided(agent, bob)
    import json

    raw = json.dumps({"thread_id": "t-1", "status": "completed", "output": {"total": 0.5}})
    if output == "INF":
        raw = raw.replace("0.5", "1e400")
    else:
        raw = json.dumps({"thread_id": "t-1", "status": "completed", "output": output})
    answer = agent_client(agent_key).post(FINISH, raw, content_type="application/json")
    # Either refused with a 400 naming output, or stored so that every reader still works.
    if answer.status_code == 400:
        assert any("output" in field for field in answer.json()["errors"])
        return
    assert answer.status_code == 200, (answer.status_code, answer.content[:300])
    run = AgentRun.objects.get(pk=remote.run_id)
    assert run.status == AgentRun.Status.COMPLETED
    admin_pages, admin_api = client_for(admin), rest_client_for(admin)
    admin_pages.raise_request_exception = False
    admin_api.raise_request_exception = False
    for path in (f"/runs/{run.pk}/", "/runs/", "/audit/"):
        page = admin_pages.get(path)
        assert page.status_code == 200, (path, page.status_code)
    for path in (f"/api/runs/{run.pk}/", "/api/runs/"):
        got = admin_api.get(path)
        assert got.status_code == 200, (path, got.status_code)
    assert chain_verify_db().ok


def test_a_finish_output_nested_past_the_json_limit_gets_400(demo_policy, agent, agent_key, bob):
    opened_and_decided(agent, bob)
    deep: dict = {}
    node = deep
    for _ in range(62):
        node["a"] = {}
        node = node["a"]
    node["x"] = [1]
    answer = agent_client(agent_key).post(
        FINISH, {"thread_id": "t-1", "status": "completed", "output": deep}, format="json"
    )
    assert answer.status_code in (200, 400), answer.status_code  # never a 500


def test_a_thread_id_with_a_nul_gets_400_not_500(demo_policy, agent, agent_key, bob):
    opened_and_decided(agent, bob)
    answer = agent_client(agent_key).post(
        FINISH, {"thread_id": "t-\u00001", "status": "completed"}, format="json"
    )
    assert answer.status_code == 400, answer.status_code


def test_finishing_while_the_advance_closes_the_decision_leaves_the_run_finished(
    demo_policy, agent, agent_key, bob, monkeypatch
):
    """The agent hears "decided" by callback (sent as the decision closes) and finishes its
    thread before the advance that closed it moves the run back to running."""
    from agents.remote import closing

    remote, approvals = open_request(agent)
    decide(approvals[0], bob)
    real = closing.connector_resume_run

    def agent_finishes_meanwhile(*, run):
        real(run=run)
        threads.remote_thread_finish(agent=agent, thread_id="t-1", status="completed")

    monkeypatch.setattr(closing, "connector_resume_run", agent_finishes_meanwhile)
    outcome = advance.run_advance(run_id=remote.run_id)
    run = AgentRun.objects.get(pk=remote.run_id)
    assert run.status == AgentRun.Status.COMPLETED, outcome
    assert run.lease_owner == ""
    remote.refresh_from_db()
    assert remote.status == RemoteRequest.Status.DECIDED


def test_a_finished_run_never_keeps_an_approval_open_to_decide(demo_policy, agent, bob):
    """Two requests of one thread: the first decided and closed, the second pending. The
    thread cannot finish while the second waits (409), so no pending approval outlives it."""
    first = opened_and_decided(agent, bob)
    open_request(agent, hitl(), interrupt_id="i-2")
    from agents.remote.errors import RemoteRequestConflict

    with pytest.raises(RemoteRequestConflict):
        threads.remote_thread_finish(agent=agent, thread_id="t-1", status="failed", error="x")
    assert AgentRun.objects.get(pk=first.run_id).status != AgentRun.Status.FAILED
    assert ApprovalRequest.objects.filter(status="pending").count() == 1


def test_the_finish_error_text_with_a_nul_gets_400(demo_policy, agent, agent_key, bob):
    opened_and_decided(agent, bob)
    answer = agent_client(agent_key).post(
        FINISH, {"thread_id": "t-1", "status": "failed", "error": "bad\u0000"}, format="json"
    )
    assert answer.status_code == 400
