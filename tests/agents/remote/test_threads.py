"""An external agent ends its thread: the run completes or fails in the console, audited; a
finished thread takes no new request."""

from __future__ import annotations

from agents.remote.models import RemoteRequest
from agents.runtime import advance
from approvals.models import AgentRun
from audit.models import AuditEvent
from tests.agents.remote.test_api import URL, agent_client, body
from tests.support.api_auth import api_auth_header
from tests.support.approvals import decide

FINISH = URL + "threads/finish/"


def opened_and_decided(client, bob) -> RemoteRequest:
    answer = client.post(URL, body(), format="json").json()
    remote = RemoteRequest.objects.get(pk=answer["id"])
    decide(remote.run.approvals.get(), bob)
    advance.run_advance(run_id=remote.run_id)
    return remote


def test_the_agent_completes_its_thread_and_the_run_shows_completed(demo_policy, agent_key, bob):
    client = agent_client(agent_key)
    remote = opened_and_decided(client, bob)

    done = client.post(
        FINISH, {"thread_id": "t-1", "status": "completed", "output": {"paid": 20}}, format="json"
    )
    assert done.status_code == 200, done.json()
    assert done.json() == {"thread_id": "t-1", "run_id": str(remote.run_id), "status": "completed"}
    run = AgentRun.objects.get(pk=remote.run_id)
    assert (run.status, run.output) == ("completed", {"paid": 20})
    assert run.finished_at is not None
    event = AuditEvent.objects.get(run_id=run.pk, action="run.completed")
    # The agent's service user, as for its requests.
    assert event.actor == AuditEvent.objects.get(run_id=run.pk, action="remote.requested").actor
    # Again: the same answer, nothing recorded twice.
    again = client.post(FINISH, {"thread_id": "t-1", "status": "completed"}, format="json")
    assert again.status_code == 200
    assert AuditEvent.objects.filter(run_id=run.pk, action="run.completed").count() == 1
    # A finished thread takes no new request; another end is a conflict.
    later = client.post(URL, body(interrupt_id="i-2"), format="json")
    assert later.status_code == 409
    failed = client.post(FINISH, {"thread_id": "t-1", "status": "failed"}, format="json")
    assert failed.status_code == 409


def test_a_thread_with_a_pending_request_cannot_finish(demo_policy, agent_key):
    client = agent_client(agent_key)
    client.post(URL, body(), format="json")
    refused = client.post(FINISH, {"thread_id": "t-1", "status": "completed"}, format="json")
    assert refused.status_code == 409
    assert "thread_id" in refused.json()["errors"]


def test_a_failed_thread_keeps_its_error(demo_policy, agent_key, bob):
    client = agent_client(agent_key)
    remote = opened_and_decided(client, bob)
    done = client.post(
        FINISH, {"thread_id": "t-1", "status": "failed", "error": "CRM down"}, format="json"
    )
    assert done.status_code == 200
    run = AgentRun.objects.get(pk=remote.run_id)
    assert (run.status, run.error) == ("failed", "CRM down")


def test_unknown_threads_other_agents_threads_bad_input_and_people_are_refused(
    demo_policy, agent_key, bob
):
    from agents.remote.registry import external_agent_key_issue
    from tests.agents.remote.conftest import make_agent

    client = agent_client(agent_key)
    opened_and_decided(client, bob)
    _, other_key = external_agent_key_issue(agent=make_agent("other"), actor=None)
    other = agent_client(other_key)
    assert (
        other.post(FINISH, {"thread_id": "t-1", "status": "completed"}, format="json").status_code
        == 404
    )
    assert (
        client.post(FINISH, {"thread_id": "t-9", "status": "completed"}, format="json").status_code
        == 404
    )
    bad = client.post(FINISH, {"thread_id": "t-1", "status": "done"}, format="json")
    assert bad.status_code == 400 and "status" in bad.json()["errors"]
    person = agent_client("x")
    person.credentials(**{"HTTP_AUTHORIZATION": api_auth_header(bob)["Authorization"]})
    assert (
        person.post(FINISH, {"thread_id": "t-1", "status": "completed"}, format="json").status_code
        == 403
    )
    assert AgentRun.objects.get().status == "running"
