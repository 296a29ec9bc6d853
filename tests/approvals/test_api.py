"""The approvals API: list and filters, detail, decisions and the answers that refuse them."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from approvals.models import ApprovalRequest
from audit.models import AuditEvent
from audit.private import event_data_open
from tests.support.people import rest_client_for
from tests.support.probes import ProbeApprovalFactory, ProbeRunFactory
from tests.support.queue import tasks_named


def decide(client, approval, **body):
    body.setdefault("payload_hash", approval.payload_hash)
    return client.post(f"/api/approvals/{approval.id}/decision/", body, format="json")


@pytest.fixture
def pending(alice):
    return ProbeApprovalFactory(run=ProbeRunFactory(requested_by=alice))


@pytest.fixture
def as_bob(bob):
    return rest_client_for(bob)


def test_pending_approvals_are_listed_soonest_expiry_first_with_cursor_pagination(as_bob, alice):
    now = timezone.now()
    run = ProbeRunFactory(requested_by=alice)
    wanted = [
        ProbeApprovalFactory(run=run, expires_at=now + dt.timedelta(minutes=minutes))
        for minutes in (50, 10, 30, 20, 40)
    ]
    ProbeApprovalFactory(run=run, status=ApprovalRequest.Status.APPROVED)
    ProbeApprovalFactory(
        run=run, expires_at=now - dt.timedelta(minutes=1)
    )  # expired, not swept yet

    seen = []
    pages = 0
    url = "/api/approvals/?status=pending&page_size=2"
    while url:
        response = as_bob.get(url)
        assert response.status_code == 200
        seen += [row["id"] for row in response.json()["results"]]
        url = response.json()["next"]
        pages += 1

    assert pages == 3
    assert seen == [a.id for a in sorted(wanted, key=lambda a: a.expires_at)]


def test_mine_keeps_only_approvals_the_user_may_decide(as_bob, alice, bob):
    theirs = ProbeApprovalFactory(run=ProbeRunFactory(requested_by=alice))
    ProbeApprovalFactory(run=ProbeRunFactory(requested_by=bob))

    response = as_bob.get("/api/approvals/", {"status": "pending", "mine": "true"})

    assert [row["id"] for row in response.json()["results"]] == [theirs.id]


def test_decided_approvals_are_listed_by_status(as_bob, alice):
    run = ProbeRunFactory(requested_by=alice)
    approved = ProbeApprovalFactory(run=run, status=ApprovalRequest.Status.APPROVED)
    ProbeApprovalFactory(run=run)

    response = as_bob.get("/api/approvals/", {"status": "approved"})

    assert [row["id"] for row in response.json()["results"]] == [approved.id]


def test_an_unknown_status_filter_is_a_400_naming_status(as_bob):
    response = as_bob.get("/api/approvals/", {"status": "maybe"})

    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"status"}


def test_approval_detail_shows_the_payload_and_its_hash(as_bob, pending):
    response = as_bob.get(f"/api/approvals/{pending.id}/")

    assert response.status_code == 200
    body = response.json()
    assert body["payload"] == pending.payload
    assert body["payload_hash"] == pending.payload_hash
    assert body["requested_by"] == "alice"
    assert body["can_decide"] is True


def test_approval_detail_tells_the_requester_they_cannot_decide(alice, pending):
    response = rest_client_for(alice).get(f"/api/approvals/{pending.id}/")

    assert response.json()["can_decide"] is False


@pytest.mark.parametrize("approval_id", ["999999", "abc", "99999999999999999999999", "0"])
def test_an_unknown_or_malformed_approval_id_is_a_404(as_bob, approval_id):
    assert as_bob.get(f"/api/approvals/{approval_id}/").status_code == 404
    response = as_bob.post(
        f"/api/approvals/{approval_id}/decision/",
        {"decision": "approve", "payload_hash": "x"},
        format="json",
    )
    assert response.status_code == 404
    assert response.json() == {"detail": "No approval with this id.", "errors": {}}


def test_approving_returns_200_and_queues_one_advance(
    as_bob, bob, pending, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = decide(as_bob, pending, decision="approve", note="looks right")

    assert response.status_code == 200
    assert response.json()["status"] == "approved"
    assert response.json()["decided_by"] == "bob"
    pending.refresh_from_db()
    assert (pending.status, pending.decided_by) == (ApprovalRequest.Status.APPROVED, bob)
    assert pending.decision["args"] == pending.args
    assert tasks_named(queued, "agents.tasks.run_advance") == [
        ("agents.tasks.run_advance", str(pending.run_id))
    ]
    event = AuditEvent.objects.get(action="approval.decided", approval_id=pending.id)
    assert event_data_open(event)["note"] == "looks right"


def test_an_edit_stores_the_edited_args_and_audits_the_diff(as_bob, pending):
    edited = {"order_id": "A-100", "amount": 60}

    response = decide(as_bob, pending, decision="edit", args=edited, message="half now")

    assert response.status_code == 200
    pending.refresh_from_db()
    assert pending.status == ApprovalRequest.Status.EDITED
    assert pending.decision["args"] == edited
    assert pending.args == {"order_id": "A-100", "amount": 120}
    event = AuditEvent.objects.get(action="approval.decided", approval_id=pending.id)
    opened = event_data_open(event)  # the record's personal keys are sealed
    assert opened["proposed_args"] == {"order_id": "A-100", "amount": 120}
    assert opened["final_args"] == edited
    assert opened["diff"] == {"amount": {"from": 120, "to": 60}}


def test_an_unknown_decision_is_a_400_naming_decision(as_bob, pending):
    response = decide(as_bob, pending, decision="maybe")

    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"decision"}


def test_an_edit_without_args_is_a_400_naming_args(as_bob, pending):
    response = decide(as_bob, pending, decision="edit")

    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"args"}


def test_args_that_are_not_an_object_are_a_400_naming_args(as_bob, pending):
    response = decide(as_bob, pending, decision="edit", args=["amount", 60])

    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"args"}


def test_edited_args_failing_the_tools_schema_are_a_400_naming_the_field(as_bob, pending):
    response = decide(as_bob, pending, decision="edit", args={"order_id": "A-100", "amount": 900})

    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"args.amount"}
    pending.refresh_from_db()
    assert pending.is_pending


def test_edited_args_missing_a_field_name_it(as_bob, pending):
    response = decide(as_bob, pending, decision="edit", args={"amount": 10})

    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"args.order_id"}


def test_a_missing_payload_hash_is_a_400_naming_it(as_bob, pending):
    response = as_bob.post(
        f"/api/approvals/{pending.id}/decision/", {"decision": "approve"}, format="json"
    )

    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"payload_hash"}


def test_malformed_json_in_a_decision_is_a_400(as_bob, pending):
    response = as_bob.post(
        f"/api/approvals/{pending.id}/decision/", "{", content_type="application/json"
    )

    assert response.status_code == 400
    pending.refresh_from_db()
    assert pending.is_pending


def test_a_user_without_the_right_to_decide_gets_403(frank, pending):
    response = decide(rest_client_for(frank), pending, decision="approve")  # compliance sees it

    assert response.status_code == 403
    assert response.json() == {
        "detail": "You do not have the right to decide approvals.",
        "errors": {},
    }
    pending.refresh_from_db()
    assert pending.is_pending


def test_the_requester_may_not_decide_their_own_run_even_as_an_approver(alice, pending):
    alice.user_permissions.add(
        Permission.objects.get(content_type__app_label="approvals", codename="decide")
    )

    response = decide(rest_client_for(alice), pending, decision="approve")

    assert response.status_code == 403
    assert "four eyes" in response.json()["detail"]
    pending.refresh_from_db()
    assert pending.is_pending


def test_a_second_decision_gets_409_naming_who_decided(as_bob, carol, pending):
    assert decide(as_bob, pending, decision="approve").status_code == 200

    response = decide(rest_client_for(carol), pending, decision="reject")

    assert response.status_code == 409
    body = response.json()
    assert (body["reason"], body["status"], body["decided_by"]) == (
        "already_decided",
        "approved",
        "bob",
    )
    assert body["decided_at"] is not None
    assert AuditEvent.objects.filter(action="approval.decided").count() == 1


def test_a_stale_payload_hash_gets_409(as_bob, pending):
    response = decide(as_bob, pending, decision="approve", payload_hash="0" * 64)

    assert response.status_code == 409
    body = response.json()
    assert body["reason"] == "hash_mismatch"
    assert set(body["errors"]) == {"payload_hash"}
    pending.refresh_from_db()
    assert pending.is_pending


def test_an_expired_approval_gets_409(as_bob, alice):
    approval = ProbeApprovalFactory(
        run=ProbeRunFactory(requested_by=alice), expires_at=timezone.now() - dt.timedelta(seconds=1)
    )

    response = decide(as_bob, approval, decision="approve")

    assert response.status_code == 409
    assert response.json()["reason"] == "expired"
    approval.refresh_from_db()
    assert approval.is_pending
