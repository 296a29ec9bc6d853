"""The remote approval service over REST (docs/remote.md): agents only, their own requests."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from agents.remote.models import RemoteRequest
from agents.remote.registry import external_agent_key_issue, external_agent_key_revoke
from agents.runtime import advance
from approvals.models import ApprovalRequest
from tests.agents.remote.conftest import make_agent
from tests.support.api_auth import api_auth_header
from tests.support.approvals import decide

URL = "/api/approval-requests/"


def agent_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {key}")
    return client


def hitl(amount: int = 20) -> dict:
    return {
        "action_requests": [
            {"name": "refund_order", "args": {"order_id": "o-1", "amount": amount}}
        ],
        "review_configs": [{"action_name": "refund_order", "allowed_decisions": ["approve"]}],
    }


def body(**fields) -> dict:
    return {"thread_id": "t-1", "interrupt_id": "i-1", "value": hitl(), **fields}


def test_an_agent_opens_a_request_and_a_retry_gets_the_same_one(demo_policy, agent_key):
    client = agent_client(agent_key)
    first = client.post(URL, body(rationale="customer asked"), format="json")
    again = client.post(URL, body(rationale="customer asked"), format="json")

    assert first.status_code == 201, first.json()
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    answer = first.json()
    assert answer["status"] == "pending"
    assert answer["protocol"] == "langchain.hitl"
    assert answer["resume"] is None
    [approval] = answer["approvals"]
    assert approval["tier"] == "write"
    assert approval["status"] == "pending"
    assert approval["idempotency_key"].startswith("cak_")
    assert approval["url"].endswith(f"/approvals/{approval['id']}/")
    stored = ApprovalRequest.objects.get(pk=approval["id"])
    assert stored.payload["rationale"] == "customer asked"
    assert stored.payload_hash == approval["payload_hash"]


def test_the_same_ids_with_another_value_get_409(demo_policy, agent_key):
    client = agent_client(agent_key)
    client.post(URL, body(), format="json")
    answer = client.post(URL, body(value=hitl(amount=21)), format="json")
    assert answer.status_code == 409
    assert "value" in answer.json()["errors"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"thread_id": ""}, "thread_id"),
        ({"interrupt_id": "x" * 201}, "interrupt_id"),
        ({"value": None}, "value"),
        ({"callback_url": "ftp://agent.example/x"}, "callback_url"),
        ({"callback_url": "https://evil.example/hooks"}, "callback_url"),
        ({"run_input": [1]}, "run_input"),
        ({"value": {"action_requests": [], "review_configs": []}}, "value"),
    ],
)
def test_bad_input_gets_400_naming_the_field(demo_policy, agent_key, fields, field):
    answer = agent_client(agent_key).post(URL, body(**fields), format="json")
    assert answer.status_code == 400, answer.json()
    assert field in answer.json()["errors"]


def test_a_tool_outside_the_agents_list_gets_403_naming_it(demo_policy):
    agent = make_agent("narrow", tools=["ticket_create"])
    key = external_agent_key_issue(agent=agent, actor="system:test")[1]
    answer = agent_client(key).post(URL, body(), format="json")
    assert answer.status_code == 403
    assert "refund_order" in answer.json()["detail"]


def test_a_persons_token_is_refused_on_the_agent_endpoints(demo_policy, bob):
    client = APIClient()
    client.credentials(**{"HTTP_AUTHORIZATION": api_auth_header(bob)["Authorization"]})
    for answer in (client.get(URL), client.post(URL, body(), format="json")):
        assert answer.status_code == 403
        assert "agent credentials" in answer.json()["detail"]


def test_without_credentials_the_agent_endpoints_answer_401(db):
    answer = APIClient().get(URL)
    assert answer.status_code == 401
    assert answer["WWW-Authenticate"].startswith("Agent")


@pytest.mark.parametrize(
    "path", ["/api/approvals/", "/api/runs/", "/api/approvals/1/decision/", "/api/audit/"]
)
def test_an_agent_key_is_no_credential_anywhere_else(demo_policy, agent_key, path):
    client = agent_client(agent_key)
    answer = client.post(path, {}, format="json") if "decision" in path else client.get(path)
    assert answer.status_code == 401


def test_a_revoked_key_or_an_inactive_agent_gets_401(demo_policy, agent):
    row, key = external_agent_key_issue(agent=agent, actor="system:test")
    assert agent_client(key).get(URL).status_code == 200
    external_agent_key_revoke(key=row, actor="system:test")
    assert agent_client(key).get(URL).status_code == 401

    _, other = external_agent_key_issue(agent=agent, actor="system:test")
    agent.is_active = False
    agent.save()
    assert agent_client(other).get(URL).status_code == 401
    assert agent_client("agk_" + "x" * 43).get(URL).status_code == 401


def test_an_agent_cannot_read_or_report_on_another_agents_requests(demo_policy, agent_key):
    opened = agent_client(agent_key).post(URL, body(), format="json").json()
    other = make_agent("other")
    intruder = agent_client(external_agent_key_issue(agent=other, actor="system:test")[1])

    assert intruder.get(f"{URL}{opened['id']}/").status_code == 404
    report = {
        "approval_id": opened["approvals"][0]["id"],
        "idempotency_key": opened["approvals"][0]["idempotency_key"],
        "executed_args": {},
        "status": "succeeded",
    }
    assert intruder.post(f"{URL}{opened['id']}/outcome/", report, format="json").status_code == 404
    assert intruder.get(URL).json()["results"] == []
    assert intruder.get(f"{URL}not-a-uuid/").status_code == 404


def test_the_list_filters_by_thread(demo_policy, agent_key):
    client = agent_client(agent_key)
    client.post(URL, body(), format="json")
    client.post(URL, body(thread_id="t-2"), format="json")
    answer = client.get(URL, {"thread_id": "t-2"}).json()
    assert [r["thread_id"] for r in answer["results"]] == ["t-2"]


def test_wait_outside_its_range_gets_400(demo_policy, agent_key):
    client = agent_client(agent_key)
    opened = client.post(URL, body(), format="json").json()
    for wait in ("-1", "31", "soon"):
        answer = client.get(f"{URL}{opened['id']}/", {"wait": wait})
        assert answer.status_code == 400
        assert "wait" in answer.json()["errors"]


def test_a_decided_request_reads_its_resume_value(demo_policy, agent_key, bob):
    client = agent_client(agent_key)
    opened = client.post(URL, body(), format="json").json()
    decide(ApprovalRequest.objects.get(pk=opened["approvals"][0]["id"]), bob)
    advance.run_advance(run_id=opened["run_id"])

    answer = client.get(f"{URL}{opened['id']}/").json()
    assert answer["status"] == RemoteRequest.Status.DECIDED
    assert answer["resume"] == {"decisions": [{"type": "approve"}]}
    assert answer["approvals"][0]["decision"]["by"] == "bob"
    assert answer["decided_at"] is not None


def test_the_list_reads_a_pages_approvals_in_one_query(
    demo_policy, agent_key, django_assert_max_num_queries
):
    client = agent_client(agent_key)
    client.post(URL, body(), format="json")
    with django_assert_max_num_queries(100) as one:
        first = client.get(URL)
    queries_for_one = len(one.captured_queries)
    for n in range(2, 6):
        client.post(URL, body(thread_id=f"t-{n}", interrupt_id=f"i-{n}"), format="json")
    with django_assert_max_num_queries(queries_for_one):
        listed = client.get(URL)
    assert len(first.json()["results"]) == 1
    assert len(listed.json()["results"]) == 5
    assert all(len(r["approvals"]) == 1 for r in listed.json()["results"])
