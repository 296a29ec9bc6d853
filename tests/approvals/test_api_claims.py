"""The claim and assign endpoints, and the ``claim`` of an approval in the API's answers."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from approvals.models import ApprovalClaim, ApprovalRequest
from approvals.services import approval_assign, approval_claim
from tests.support.factories import ApprovalFactory, RunFactory
from tests.support.people import rest_client_for


@pytest.fixture
def critical(demo_policy, alice) -> ApprovalRequest:
    return ApprovalFactory(run=RunFactory(requested_by=alice), tier="critical")


def _claim_url(approval: ApprovalRequest) -> str:
    return f"/api/approvals/{approval.pk}/claim/"


def _assign_url(approval: ApprovalRequest) -> str:
    return f"/api/approvals/{approval.pk}/assign/"


def test_a_reviewer_claims_and_releases_and_the_approval_shows_the_claim(critical, bob, carol):
    as_bob = rest_client_for(bob)

    response = as_bob.post(_claim_url(critical))

    assert response.status_code == 200
    body = response.json()
    assert (body["by"], body["assigned_by"]) == ("bob", None)
    assert body["since"] and body["until"] > body["since"]
    seen = rest_client_for(carol).get(f"/api/approvals/{critical.pk}/").json()
    assert seen["claim"] == body
    listed = rest_client_for(carol).get("/api/approvals/", {"status": "pending"}).json()
    assert [a["claim"] for a in listed["results"]] == [body]

    assert as_bob.delete(_claim_url(critical)).status_code == 204
    assert as_bob.get(f"/api/approvals/{critical.pk}/").json()["claim"] is None


def test_who_may_not_claim_gets_403_who_may_not_see_404_anonymous_401(
    critical, alice, bob, carol, dave
):
    assert rest_client_for(alice).post(_claim_url(critical)).status_code == 403  # the requester
    assert rest_client_for(dave).post(_claim_url(critical)).status_code == 404  # cannot see it
    assert rest_client_for(dave).post(_assign_url(critical), {"user": "carol"}).status_code == 404
    assert APIClient().post(_claim_url(critical)).status_code in (401, 403)
    assert rest_client_for(bob).post("/api/approvals/999999/claim/").status_code == 404
    assert not ApprovalClaim.objects.exists()


def test_a_second_claim_gets_409_naming_who_holds_it(critical, bob, carol):
    approval_claim(approval=critical, user=bob)

    response = rest_client_for(carol).post(_claim_url(critical))

    assert response.status_code == 409
    assert "bob is looking at this since" in response.json()["detail"]


def test_an_admin_assigns_and_the_assignee_lists_it_with_assigned_me(critical, admin, bob, carol):
    as_admin = rest_client_for(admin)

    response = as_admin.post(_assign_url(critical), {"user": "carol"}, format="json")

    assert response.status_code == 200
    assert (response.json()["by"], response.json()["assigned_by"]) == ("carol", "admin")
    assert response.json()["until"] is None
    mine = rest_client_for(carol).get("/api/approvals/", {"assigned": "me"}).json()["results"]
    assert [a["id"] for a in mine] == [critical.pk]
    assert mine[0]["claim"]["assigned_by"] == "admin"
    assert rest_client_for(bob).get("/api/approvals/", {"assigned": "me"}).json()["results"] == []

    assert as_admin.delete(_assign_url(critical)).status_code == 204
    assert rest_client_for(carol).get("/api/approvals/", {"assigned": "me"}).json()["results"] == []
    assert as_admin.delete(_assign_url(critical)).status_code == 409  # nothing to unassign


def test_a_reviewer_may_not_assign(critical, bob):
    response = rest_client_for(bob).post(_assign_url(critical), {"user": "carol"}, format="json")

    assert response.status_code == 403
    assert "admin or a lead of the critical tier" in response.json()["detail"]
    assert rest_client_for(bob).delete(_assign_url(critical)).status_code == 403


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ({"user": "dave"}, "dave may not decide critical actions."),
        ({"user": "alice"}, "alice requested this run and may not decide it (four eyes)."),
        ({"user": "nobody"}, "No active user is named 'nobody'."),
        ({}, "This field is required."),
    ],
)
def test_a_bad_assignee_gets_400_naming_the_user_field(critical, admin, body, why):
    response = rest_client_for(admin).post(_assign_url(critical), body, format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == {"user": why}


def test_assigned_me_with_another_status_is_400_naming_the_field(critical, carol):
    response = rest_client_for(carol).get(
        "/api/approvals/", {"assigned": "me", "status": "approved"}
    )
    assert response.status_code == 400
    assert "assigned" in response.json()["errors"]
    response = rest_client_for(carol).get("/api/approvals/", {"assigned": "you"})
    assert response.status_code == 400
    assert "assigned" in response.json()["errors"]


def test_a_decided_approval_gets_409_and_shows_no_claim(critical, bob, carol):
    approval_claim(approval=critical, user=bob)
    ApprovalRequest.objects.filter(pk=critical.pk).update(status="rejected")

    assert rest_client_for(carol).post(_claim_url(critical)).status_code == 409
    assert rest_client_for(bob).delete(_claim_url(critical)).status_code == 409
    assert rest_client_for(carol).get(f"/api/approvals/{critical.pk}/").json()["claim"] is None
    run = rest_client_for(carol).get(f"/api/runs/{critical.run_id}/").json()
    assert [a["claim"] for a in run["approvals"]] == [None]


def test_the_list_reads_the_claims_of_a_page_in_one_query(demo_policy, alice, admin, bob, carol):
    run = RunFactory(requested_by=alice)

    def list_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            response = rest_client_for(carol).get("/api/approvals/", {"status": "pending"})
        assert response.status_code == 200
        return len(queries)

    for _ in range(2):
        approval_claim(approval=ApprovalFactory(run=run, tier="critical"), user=bob)
    list_queries()  # warm: the first request also reads what later ones keep
    few = list_queries()
    for _ in range(4):
        approval = ApprovalFactory(run=run, tier="critical")
        approval_assign(approval=approval, username="bob", by=admin)
    assert list_queries() == few
