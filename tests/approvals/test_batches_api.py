"""The batches API: GET /api/approvals/batches/ and POST /api/approvals/batch-decision/."""

from __future__ import annotations

import pytest
from django.db import transaction

from approvals.models import ApprovalRequest, ApprovalVote
from approvals.services.rounds import round_start
from audit.models import AuditEvent
from tests.support.approvals import request_approval
from tests.support.people import rest_client_for
from tests.support.queue import tasks_named

ADVANCE = "agents.tasks.run_advance"
URL = "/api/approvals/batch-decision/"


def refunds(requester, tier: str, count: int = 3) -> list[ApprovalRequest]:
    return [
        request_approval(requester=requester, tier=tier, args={"order_id": f"A-{n}", "amount": n})
        for n in range(1, count + 1)
    ]


def items(approvals: list[ApprovalRequest]) -> list[dict]:
    return [{"id": a.pk, "payload_hash": a.payload_hash} for a in approvals]


@pytest.fixture
def as_bob(bob):
    return rest_client_for(bob)


def test_batches_lists_the_readers_batches_with_key_count_and_oldest(demo_policy, alice, as_bob):
    approvals = refunds(alice, "write")

    response = as_bob.get("/api/approvals/batches/")

    assert response.status_code == 200, response.content
    (batch,) = response.json()["results"]
    assert batch["key"] == "refund_agent/refund_order/write"
    assert (batch["agent"], batch["tool"], batch["tier"], batch["count"]) == (
        "refund_agent",
        "refund_order",
        "write",
        3,
    )
    assert batch["oldest"].startswith(approvals[0].created_at.date().isoformat())


def test_a_batch_decision_with_one_stale_item_answers_409_for_that_item_only(
    demo_policy, alice, bob, carol, as_bob, queued, django_capture_on_commit_callbacks
):
    first, stale, third = refunds(alice, "write")
    body = {"decision": "approve", "items": items([first, stale, third]), "message": "ok"}
    with transaction.atomic():  # a new round for other args, after bob loaded the batch
        locked = ApprovalRequest.objects.select_for_update().get(pk=stale.pk)
        round_start(approval=locked, args={"order_id": "A-2", "amount": 900}, by=carol)

    with django_capture_on_commit_callbacks(execute=True):
        response = as_bob.post(URL, body, format="json")

    assert response.status_code == 200, response.content
    data = response.json()
    assert data["batch"] == "refund_agent/refund_order/write"
    results = {r["id"]: r for r in data["results"]}
    assert [r["id"] for r in data["results"]] == [first.pk, stale.pk, third.pk]
    assert (results[first.pk]["status"], results[first.pk]["outcome"]) == (200, "approved")
    assert (results[third.pk]["status"], results[third.pk]["outcome"]) == (200, "approved")
    assert (results[stale.pk]["status"], results[stale.pk]["outcome"]) == (409, "hash_mismatch")
    assert "changed since you loaded it" in results[stale.pk]["detail"]
    assert ApprovalRequest.objects.get(pk=stale.pk).status == "pending"
    assert len(tasks_named(queued, ADVANCE)) == 2


def test_a_quorum_tier_answers_voted_with_the_count_for_each_item(demo_policy, alice, as_bob):
    approvals = refunds(alice, "critical", count=2)

    response = as_bob.post(URL, {"decision": "approve", "items": items(approvals)}, format="json")

    assert response.status_code == 200, response.content
    assert [
        (r["status"], r["outcome"], r["received"], r["required"])
        for r in response.json()["results"]
    ] == [
        (200, "voted", 1, 2),
        (200, "voted", 1, 2),
    ]


def test_an_item_of_another_tier_is_400_naming_it_and_nothing_is_decided(demo_policy, alice, carol):
    writes = refunds(alice, "write", count=2)
    (critical,) = refunds(alice, "critical", count=1)
    body = {"decision": "approve", "items": items([*writes, critical])}

    response = rest_client_for(carol).post(URL, body, format="json")

    assert response.status_code == 400, response.content
    assert list(response.json()["errors"]) == ["items[2].id"]
    assert not ApprovalVote.objects.exists()
    assert not AuditEvent.objects.filter(action="approval.batch_decided").exists()


def test_a_first_item_the_reader_may_not_see_is_400_naming_it(demo_policy, alice, dave):
    approvals = refunds(alice, "write", count=2)

    response = rest_client_for(dave).post(
        URL, {"decision": "approve", "items": items(approvals)}, format="json"
    )

    assert response.status_code == 400, response.content
    assert response.json()["errors"] == {"items[0].id": "no such approval"}


def test_the_requester_gets_403_for_each_of_their_own_runs_approvals(demo_policy, alice):
    alice.groups.add(demo_policy["approvers-write"])
    approvals = refunds(alice, "write", count=2)

    response = rest_client_for(alice).post(
        URL, {"decision": "reject", "items": items(approvals)}, format="json"
    )

    assert response.status_code == 200, response.content
    assert {r["status"] for r in response.json()["results"]} == {403}
    assert not ApprovalVote.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"decision": "edit", "items": [{"id": 1, "payload_hash": "x"}]}, "decision"),
        ({"decision": "approve", "items": []}, "items"),
        ({"decision": "approve", "items": [{"id": "one", "payload_hash": "x"}]}, "items"),
        ({"decision": "approve"}, "items"),
    ],
)
def test_bad_input_is_400_naming_the_field(demo_policy, as_bob, body, field):
    response = as_bob.post(URL, body, format="json")

    assert response.status_code == 400, response.content
    assert any(name.startswith(field) for name in response.json()["errors"])


@pytest.mark.parametrize(
    ("item", "message", "field"),
    [
        ({"payload_hash": 7}, "", "items.0.payload_hash"),
        ({"id": "{pk}"}, "", "items.0.id"),
        ({}, 3, "message"),
    ],
)
def test_a_value_of_the_wrong_json_type_is_400_not_read_as_text(
    demo_policy, alice, as_bob, item, message, field
):
    approvals = refunds(alice, "write", count=2)
    first = {"id": approvals[0].pk, "payload_hash": approvals[0].payload_hash}
    first.update({k: (str(approvals[0].pk) if v == "{pk}" else v) for k, v in item.items()})
    body = {"decision": "approve", "items": [first], "message": message}

    response = as_bob.post(URL, body, format="json")

    assert response.status_code == 400, response.content
    assert list(response.json()["errors"]) == [field]
    assert not ApprovalVote.objects.exists()


def test_anonymous_is_refused(client):
    response = client.post(URL, {}, content_type="application/json")
    assert response.status_code in (401, 403)
