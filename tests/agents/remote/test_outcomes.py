"""Effects reported back: recorded once, audited, a mismatch flagged; an approved action never
reported becomes a stuck item, cleared when its outcome arrives."""

from __future__ import annotations

import datetime as dt

from rest_framework.test import APIClient

from agents.remote.models import RemoteRequest
from agents.runtime import advance
from approvals.models import ApprovalOutcome, ApprovalRequest, Notification, StuckItem
from approvals.services.stuck import stuck_sweep
from audit.models import AuditEvent
from tests.agents.remote.helpers import refund
from tests.support.approvals import decide

URL = "/api/approval-requests/"


def client_of(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {key}")
    return client


def opened_and_decided(client: APIClient, bob, decision: str = "approve", **kwargs) -> dict:
    value = {
        "action_requests": [{"name": "refund_order", "args": refund(20)}],
        "review_configs": [{"action_name": "refund_order"}],
    }
    body = client.post(
        URL, {"thread_id": "t-1", "interrupt_id": "i-1", "value": value}, format="json"
    ).json()
    decide(ApprovalRequest.objects.get(pk=body["approvals"][0]["id"]), bob, decision, **kwargs)
    advance.run_advance(run_id=body["run_id"])
    return client.get(f"{URL}{body['id']}/").json()


def report(body: dict, **fields) -> dict:
    approval = body["approvals"][0]
    return {
        "approval_id": approval["id"],
        "idempotency_key": approval["idempotency_key"],
        "executed_args": refund(20),
        "result": {"refund_id": "r-1"},
        "status": "succeeded",
        **fields,
    }


def test_an_outcome_is_recorded_once_and_the_same_report_again_is_200(demo_policy, agent_key, bob):
    client = client_of(agent_key)
    body = opened_and_decided(client, bob)
    first = client.post(f"{URL}{body['id']}/outcome/", report(body), format="json")
    again = client.post(f"{URL}{body['id']}/outcome/", report(body), format="json")

    assert (first.status_code, again.status_code) == (201, 200)
    outcome = first.json()["approvals"][0]["outcome"]
    assert outcome["args_match"] is True and outcome["flags"] == []
    assert ApprovalOutcome.objects.count() == 1
    event = AuditEvent.objects.get(action="effect.reported")
    assert event.data["args_match"] is True
    assert event.data["idempotency_key"] == body["approvals"][0]["idempotency_key"]


def test_a_different_report_for_the_same_approval_is_409(demo_policy, agent_key, bob):
    client = client_of(agent_key)
    body = opened_and_decided(client, bob)
    client.post(f"{URL}{body['id']}/outcome/", report(body), format="json")
    answer = client.post(
        f"{URL}{body['id']}/outcome/", report(body, status="failed"), format="json"
    )
    assert answer.status_code == 409


def test_a_key_that_is_not_the_approvals_is_409(demo_policy, agent_key, bob):
    client = client_of(agent_key)
    body = opened_and_decided(client, bob)
    answer = client.post(
        f"{URL}{body['id']}/outcome/", report(body, idempotency_key="cak_forged"), format="json"
    )
    assert answer.status_code == 409
    assert "idempotency_key" in answer.json()["errors"]


def test_an_approval_of_another_request_is_409(demo_policy, agent_key, bob):
    client = client_of(agent_key)
    body = opened_and_decided(client, bob)
    other = client.post(
        URL,
        {
            "thread_id": "t-2",
            "interrupt_id": "i-1",
            "value": {
                "action_requests": [{"name": "refund_order", "args": refund(3)}],
                "review_configs": [],
            },
        },
        format="json",
    ).json()
    answer = client.post(f"{URL}{other['id']}/outcome/", report(body), format="json")
    assert answer.status_code == 409
    assert "approval_id" in answer.json()["errors"]


def test_bad_reports_get_400_naming_the_field(demo_policy, agent_key, bob):
    client = client_of(agent_key)
    body = opened_and_decided(client, bob)
    for fields, field in (
        ({"status": "done"}, "status"),
        ({"executed_args": [1]}, "executed_args"),
        ({"approval_id": 0}, "approval_id"),
        ({"approval_id": 2**64}, "approval_id"),
    ):
        answer = client.post(f"{URL}{body['id']}/outcome/", report(body, **fields), format="json")
        assert answer.status_code == 400, fields
        assert field in answer.json()["errors"]


def test_executed_args_that_differ_from_the_approved_ones_are_flagged(demo_policy, agent_key, bob):
    client = client_of(agent_key)
    body = opened_and_decided(client, bob)
    answer = client.post(
        f"{URL}{body['id']}/outcome/", report(body, executed_args=refund(2000)), format="json"
    )
    assert answer.status_code == 201
    assert answer.json()["approvals"][0]["outcome"]["flags"] == ["args_differ"]
    event = AuditEvent.objects.get(action="effect.reported")
    assert event.data["args_match"] is False and event.data["flags"] == ["args_differ"]


def test_the_edited_args_are_the_ones_an_outcome_must_match(demo_policy, agent_key, bob):
    client = client_of(agent_key)
    body = opened_and_decided(client, bob, "edit", args=refund(15))
    same = client.post(
        f"{URL}{body['id']}/outcome/", report(body, executed_args=refund(15)), format="json"
    )
    assert same.json()["approvals"][0]["outcome"]["args_match"] is True


def test_an_outcome_of_a_rejected_action_is_recorded_and_flagged(demo_policy, agent_key, bob):
    client = client_of(agent_key)
    body = opened_and_decided(client, bob, "reject")
    answer = client.post(f"{URL}{body['id']}/outcome/", report(body), format="json")
    assert answer.status_code == 201
    assert answer.json()["approvals"][0]["outcome"]["flags"] == ["not_approved"]


def test_an_unreported_outcome_becomes_stuck_and_clears_when_it_arrives(
    demo_policy, agent_key, bob, settings
):
    client = client_of(agent_key)
    body = opened_and_decided(client, bob)
    approval = ApprovalRequest.objects.get(pk=body["approvals"][0]["id"])
    soon = approval.decided_at + dt.timedelta(seconds=settings.REMOTE_OUTCOME_DEADLINE_SECONDS - 5)
    assert stuck_sweep(now=soon)["stuck_raised"] == 0

    late = approval.decided_at + dt.timedelta(seconds=settings.REMOTE_OUTCOME_DEADLINE_SECONDS + 5)
    assert stuck_sweep(now=late)["stuck_raised"] == 1
    item = StuckItem.objects.get(kind=StuckItem.Kind.OUTCOME_NOT_REPORTED)
    assert item.key == str(approval.pk) and item.run_id == approval.run_id
    assert "refund_order" in item.detail
    assert AuditEvent.objects.filter(action="stuck.raised", data__kind=item.kind).exists()
    assert stuck_sweep(now=late)["stuck_raised"] == 0  # raised once

    client.post(f"{URL}{body['id']}/outcome/", report(body), format="json")
    item.refresh_from_db()
    assert item.cleared_at is not None
    assert stuck_sweep(now=late) == {"stuck_raised": 0, "stuck_cleared": 0}


def test_the_sweep_clears_an_item_whose_outcome_arrived(demo_policy, agent_key, bob, settings):
    client = client_of(agent_key)
    body = opened_and_decided(client, bob)
    approval = ApprovalRequest.objects.get(pk=body["approvals"][0]["id"])
    late = approval.decided_at + dt.timedelta(seconds=settings.REMOTE_OUTCOME_DEADLINE_SECONDS + 5)
    stuck_sweep(now=late)
    ApprovalOutcome.objects.create(
        approval=approval,
        idempotency_key="k",
        status="succeeded",
        executed_args={},
        executed_args_hash="h",
        report_hash="r",
        args_match=True,
        reported_by="x",
    )  # as if recorded while the item's clearing failed
    assert stuck_sweep(now=late)["stuck_cleared"] == 1


def test_a_rejected_or_in_process_decision_never_becomes_this_stuck_item(
    demo_policy, agent_key, bob, settings, alice
):
    from tests.support.approvals import request_approval

    client = client_of(agent_key)
    opened_and_decided(client, bob, "reject")
    in_process = request_approval(requester=alice, tier="write")
    decide(in_process, bob)
    far = in_process.created_at + dt.timedelta(days=2)
    stuck_sweep(now=far)
    assert not StuckItem.objects.filter(kind=StuckItem.Kind.OUTCOME_NOT_REPORTED).exists()
    assert RemoteRequest.objects.count() == 1
    assert not Notification.objects.filter(event=Notification.Event.STUCK, text__contains="never")


def test_the_approval_page_and_api_show_the_outcome_and_its_flag(demo_policy, agent_key, bob):
    from tests.support.people import client_for, rest_client_for

    client = client_of(agent_key)
    body = opened_and_decided(client, bob)
    approval_id = body["approvals"][0]["id"]
    page = client_for(bob).get(f"/approvals/{approval_id}/").content.decode()
    assert 'data-outcome="awaited"' in page

    client.post(
        f"{URL}{body['id']}/outcome/", report(body, executed_args=refund(2000)), format="json"
    )
    page = client_for(bob).get(f"/approvals/{approval_id}/").content.decode()
    assert 'data-outcome="succeeded"' in page
    assert "executed args differ from the approved ones" in page
    api = rest_client_for(bob).get(f"/api/approvals/{approval_id}/").json()
    assert api["outcome"]["flags"] == ["args_differ"]
    assert api["outcome"]["executed_args"]["amount"] == 2000
