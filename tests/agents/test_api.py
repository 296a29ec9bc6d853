"""The runs API: start (validated input, idempotency keys), list, detail, cancel, agents."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.utils import timezone

from agents.models import Effect, RunStartKey
from approvals.models import AgentRun, ApprovalRequest
from audit.canonical import payload_hash
from audit.models import AuditEvent
from tests.support.factories import EffectFactory
from tests.support.people import rest_client_for
from tests.support.probes import API_PROBE as PROBE_AGENT
from tests.support.probes import ProbeApprovalFactory, ProbeRunFactory
from tests.support.queue import tasks_named

pytestmark = pytest.mark.usefixtures("queued")  # every task enqueued is recorded, none runs

GOOD_INPUT = {"service": "checkout", "signal": "5xx spike", "severity": "sev2"}


def start(client, body, **headers):
    return client.post("/api/runs/", body, format="json", headers=headers)


@pytest.fixture
def as_alice(alice, api_probe):
    return rest_client_for(alice)


def test_starting_a_run_returns_201_and_queues_it_on_commit(
    as_alice, alice, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = start(as_alice, {"agent": PROBE_AGENT, "input": GOOD_INPUT})

    assert response.status_code == 201
    body = response.json()
    run = AgentRun.objects.get(pk=body["id"])
    assert (run.agent, run.graph_version, run.requested_by) == (PROBE_AGENT, "7", alice)
    assert body["status"] == "queued"
    assert body["input"] == GOOD_INPUT
    assert body["approvals"] == [] and body["effects"] == []
    assert tasks_named(queued, "agents.tasks.run_advance") == [
        ("agents.tasks.run_advance", body["id"])
    ]
    assert AuditEvent.objects.filter(action="run.created", run_id=run.id).count() == 1


def test_an_unknown_agent_is_a_400_naming_agent(as_alice):
    response = start(as_alice, {"agent": "nobody", "input": GOOD_INPUT})

    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"agent"}
    assert not AgentRun.objects.exists()


def test_input_failing_the_agents_model_is_a_400_naming_the_field(as_alice):
    response = start(as_alice, {"agent": PROBE_AGENT, "input": {**GOOD_INPUT, "severity": "sev9"}})

    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"input.severity"}


def test_missing_input_fields_are_each_named(as_alice):
    response = start(as_alice, {"agent": PROBE_AGENT, "input": {"severity": "sev1"}})

    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"input.service", "input.signal"}


@pytest.mark.parametrize("bad_input", [["a"], "text", 3, None])
def test_input_that_is_not_an_object_is_a_400_naming_input(as_alice, bad_input):
    response = start(as_alice, {"agent": PROBE_AGENT, "input": bad_input})

    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"input"}


def test_malformed_json_is_a_400_not_a_500(as_alice):
    response = as_alice.post("/api/runs/", "{not json", content_type="application/json")

    assert response.status_code == 400
    assert response.json()["detail"].startswith("JSON parse error")
    assert set(response.json()["errors"]) == {"body"}


def test_a_body_that_is_not_an_object_is_a_400(as_alice):
    response = as_alice.post("/api/runs/", "[1, 2]", content_type="application/json")

    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"non_field_errors"}


def test_same_idempotency_key_and_body_returns_the_same_run(as_alice):
    body = {"agent": PROBE_AGENT, "input": GOOD_INPUT}

    first = start(as_alice, body, **{"Idempotency-Key": "k-1"})
    second = start(as_alice, body, **{"Idempotency-Key": "k-1"})

    assert first.status_code == 201
    assert second.status_code == 200
    assert first.json()["id"] == second.json()["id"]
    assert AgentRun.objects.count() == 1


def test_same_idempotency_key_with_another_body_is_a_422(as_alice):
    start(as_alice, {"agent": PROBE_AGENT, "input": GOOD_INPUT}, **{"Idempotency-Key": "k-2"})

    other = {**GOOD_INPUT, "severity": "sev1"}
    response = start(as_alice, {"agent": PROBE_AGENT, "input": other}, **{"Idempotency-Key": "k-2"})

    assert response.status_code == 422
    assert set(response.json()["errors"]) == {"Idempotency-Key"}
    assert AgentRun.objects.count() == 1


def test_a_key_whose_first_request_is_in_flight_is_a_409(as_alice, alice):
    body = {"agent": PROBE_AGENT, "input": GOOD_INPUT}
    RunStartKey.objects.create(user=alice, key="k-3", request_hash=payload_hash(body))

    response = start(as_alice, body, **{"Idempotency-Key": "k-3"})

    assert response.status_code == 409
    assert set(response.json()["errors"]) == {"Idempotency-Key"}
    assert not AgentRun.objects.exists()


def test_a_key_whose_first_request_died_long_ago_is_taken_over(as_alice, alice):
    body = {"agent": PROBE_AGENT, "input": GOOD_INPUT}
    claim = RunStartKey.objects.create(user=alice, key="k-4", request_hash=payload_hash(body))
    RunStartKey.objects.filter(pk=claim.pk).update(
        created_at=timezone.now() - dt.timedelta(minutes=5)
    )

    response = start(as_alice, body, **{"Idempotency-Key": "k-4"})

    assert response.status_code == 201
    claim.refresh_from_db()
    assert str(claim.run_id) == response.json()["id"]


def test_a_rejected_start_frees_its_idempotency_key(as_alice):
    bad = {"agent": PROBE_AGENT, "input": {"severity": "sev9"}}
    assert start(as_alice, bad, **{"Idempotency-Key": "k-5"}).status_code == 400

    good = {"agent": PROBE_AGENT, "input": GOOD_INPUT}
    assert start(as_alice, good, **{"Idempotency-Key": "k-5"}).status_code == 201


def test_idempotency_keys_belong_to_each_user(as_alice, bob):
    body = {"agent": PROBE_AGENT, "input": GOOD_INPUT}

    first = start(as_alice, body, **{"Idempotency-Key": "shared"})
    second = start(rest_client_for(bob), body, **{"Idempotency-Key": "shared"})

    assert second.status_code == 201
    assert first.json()["id"] != second.json()["id"]


def test_an_overlong_idempotency_key_is_a_400(as_alice):
    body = {"agent": PROBE_AGENT, "input": GOOD_INPUT}

    response = start(as_alice, body, **{"Idempotency-Key": "k" * 201})

    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"Idempotency-Key"}


def test_runs_are_listed_newest_first_with_cursor_pagination(as_alice, alice):
    runs = [ProbeRunFactory(requested_by=alice) for _ in range(5)]
    expected = [
        str(run.id) for run in sorted(runs, key=lambda r: (r.created_at, r.id), reverse=True)
    ]

    seen = []
    url = "/api/runs/?page_size=2"
    while url:
        page = as_alice.get(url).json()
        assert len(page["results"]) <= 2
        seen += [row["id"] for row in page["results"]]
        url = page["next"]

    assert seen == expected


def test_runs_filter_by_status_and_agent(as_alice, alice):
    waiting = ProbeRunFactory(requested_by=alice, status=AgentRun.Status.WAITING)
    ProbeRunFactory(requested_by=alice, status=AgentRun.Status.COMPLETED)
    ProbeRunFactory(requested_by=alice, status=AgentRun.Status.WAITING, agent="refund_agent")

    response = as_alice.get("/api/runs/", {"status": "waiting", "agent": PROBE_AGENT})

    assert [row["id"] for row in response.json()["results"]] == [str(waiting.id)]


def test_an_unknown_status_filter_is_a_400_naming_status(as_alice):
    response = as_alice.get("/api/runs/", {"status": "sleeping"})

    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"status"}


def test_run_detail_shows_status_approvals_and_effects(as_alice, alice):
    run = ProbeRunFactory(requested_by=alice)
    approval = ProbeApprovalFactory(run=run)
    EffectFactory(
        run=run,
        suffix="call-1",
        tool="refund_issue",
        status=Effect.Status.SUCCEEDED,
        approval=approval,
    )

    response = as_alice.get(f"/api/runs/{run.id}/")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "waiting"
    assert [(a["id"], a["status"], a["payload_hash"]) for a in body["approvals"]] == [
        (approval.id, "pending", approval.payload_hash)
    ]
    assert [(e["key"], e["tool"], e["status"], e["approval"]) for e in body["effects"]] == [
        (f"{run.thread_id}:call-1", "refund_issue", "succeeded", approval.id)
    ]


@pytest.mark.parametrize("run_id", [str(uuid.uuid4()), "not-a-uuid", "1"])
def test_an_unknown_or_malformed_run_id_is_a_404(as_alice, run_id):
    response = as_alice.get(f"/api/runs/{run_id}/")

    assert response.status_code == 404
    assert response.json() == {"detail": "No run with this id.", "errors": {}}


def test_the_requester_cancels_a_run_and_its_pending_approvals_close(
    as_alice, alice, queued, django_capture_on_commit_callbacks
):
    run = ProbeRunFactory(requested_by=alice)
    approval = ProbeApprovalFactory(run=run)

    with django_capture_on_commit_callbacks(execute=True):
        response = as_alice.post(f"/api/runs/{run.id}/cancel/")

    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.EXPIRED
    # The advance of a cancelled run compensates what it already applied.
    assert tasks_named(queued, "agents.tasks.run_advance") == [
        ("agents.tasks.run_advance", str(run.id))
    ]
    assert AuditEvent.objects.filter(action="run.cancelled", run_id=run.id).count() == 1


def test_an_approver_may_cancel_someone_elses_run(alice, bob):
    # Issue 12: an approver of one of its approvals (the decide permission alone no longer
    # shows, nor lets one cancel, a run with nothing to decide).
    run = ProbeApprovalFactory(run=ProbeRunFactory(requested_by=alice)).run

    response = rest_client_for(bob).post(f"/api/runs/{run.id}/cancel/")

    assert response.status_code == 200


def test_a_user_without_rights_may_not_cancel_someone_elses_run(alice, dave, frank):
    run = ProbeRunFactory(requested_by=alice)

    hidden = rest_client_for(dave).post(f"/api/runs/{run.id}/cancel/")
    seen = rest_client_for(frank).post(f"/api/runs/{run.id}/cancel/")  # compliance reads it

    assert hidden.status_code == 404  # as for a run that does not exist
    assert seen.status_code == 403
    run.refresh_from_db()
    assert run.status == AgentRun.Status.WAITING


def test_cancelling_a_finished_run_is_a_409(as_alice, alice):
    run = ProbeRunFactory(requested_by=alice, status=AgentRun.Status.COMPLETED)

    response = as_alice.post(f"/api/runs/{run.id}/cancel/")

    assert response.status_code == 409
    assert response.json()["errors"] == {"status": "completed"}


def test_cancelling_twice_is_harmless(as_alice, alice):
    run = ProbeRunFactory(requested_by=alice)

    as_alice.post(f"/api/runs/{run.id}/cancel/")
    response = as_alice.post(f"/api/runs/{run.id}/cancel/")

    assert response.status_code == 200
    assert AuditEvent.objects.filter(action="run.cancelled", run_id=run.id).count() == 1


def test_agents_list_describes_each_registered_agent(as_alice):
    response = as_alice.get("/api/agents/")

    assert response.status_code == 200
    probe = next(row for row in response.json() if row["name"] == PROBE_AGENT)
    assert probe["version"] == "7"
    assert probe["example_input"]["severity"] == "sev2"
    schema = probe["input_schema"]
    assert set(schema["required"]) == {"service", "signal", "severity"}
    assert schema["properties"]["severity"]["enum"] == ["sev1", "sev2", "sev3", "sev4"]


def test_the_incident_copilot_names_a_bad_severity(as_alice):
    body = {"service": "checkout", "signal": "5xx spike", "severity": "sev9"}

    response = start(as_alice, {"agent": "incident_copilot", "input": body})

    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"input.severity"}


def test_each_built_in_agents_example_input_starts_a_run(as_alice):
    agents = {row["name"]: row for row in as_alice.get("/api/agents/").json()}
    assert {"incident_copilot", "refund_agent"} <= set(agents)

    for name in ("incident_copilot", "refund_agent"):
        response = start(as_alice, {"agent": name, "input": agents[name]["example_input"]})
        assert response.status_code == 201, response.json()
        assert response.json()["graph_version"] == agents[name]["version"]
