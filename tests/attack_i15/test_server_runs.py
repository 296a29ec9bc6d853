"""Attacks on the pages and APIs of an external run: erased, cancelled, seen by people with no
right (guards: these held)."""

from __future__ import annotations

from rest_framework.test import APIClient

from agents.erasure import runs_erase
from agents.runtime import advance
from agents.services import run_cancel
from approvals.models import AgentRun, ApprovalRequest
from tests.agents.remote.helpers import hitl
from tests.support.approvals import decide
from tests.support.people import client_for, rest_client_for

URL = "/api/approval-requests/"


def test_an_erased_external_run_answers_its_agent_and_every_page(
    demo_policy, agent_key, bob, admin
):
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Agent {agent_key}")
    opened = agent.post(
        URL, {"thread_id": "t", "interrupt_id": "i", "value": hitl()}, format="json"
    ).json()
    approval = ApprovalRequest.objects.get(pk=opened["approvals"][0]["id"])
    decide(approval, bob)
    advance.run_advance(run_id=opened["run_id"])
    run = AgentRun.objects.get(pk=opened["run_id"])
    run_cancel(run=run, user=admin)  # an external run never ends by itself: erasure needs this
    advance.run_advance(run_id=run.pk)
    assert runs_erase(runs=[run.pk], user=admin, reason="subject request").erased

    assert agent.get(f"{URL}{opened['id']}/").status_code == 200
    assert agent.get(URL).status_code == 200
    pages = client_for(admin)
    for path in (f"/runs/{run.pk}/", f"/approvals/{approval.pk}/", "/runs/", "/", "/audit/"):
        assert pages.get(path).status_code == 200, path
    api = rest_client_for(admin)
    for path in (f"/api/runs/{run.pk}/", f"/api/approvals/{approval.pk}/", "/api/runs/"):
        assert api.get(path).status_code == 200, path


def test_a_person_with_no_right_sees_nothing_of_an_external_run(demo_policy, agent_key, dave):
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Agent {agent_key}")
    value = hitl()
    value["action_requests"][0]["args"]["order_id"] = "SECRET-ORDER"
    opened = agent.post(
        URL, {"thread_id": "thread-x", "interrupt_id": "i", "value": value}, format="json"
    ).json()
    approval_id = opened["approvals"][0]["id"]
    pages, api = client_for(dave), rest_client_for(dave)
    assert pages.get(f"/runs/{opened['run_id']}/").status_code == 404
    assert pages.get(f"/approvals/{approval_id}/").status_code == 404
    assert api.get(f"/api/runs/{opened['run_id']}/").status_code == 404
    assert api.get(f"/api/approvals/{approval_id}/").status_code == 404
    for path in ("/", "/runs/"):
        assert b"SECRET-ORDER" not in pages.get(path).content
        assert b"thread-x" not in pages.get(path).content
    for path in ("/api/runs/", "/api/approvals/"):
        assert api.get(path).json()["results"] == []
