"""The decision limit: one count per person for the API and the approval page, 429 with
Retry-After beyond it."""

from __future__ import annotations

from django.urls import reverse
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from tests.support.api_auth import api_auth_header
from tests.support.people import client_for
from tests.support.throttling import throttle_rates


def _api_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=api_auth_header(user)["Authorization"])
    return client


def _decide_api(client: APIClient, approval: ApprovalRequest):
    body = {"decision": "approve", "payload_hash": "stale"}  # refused (409), counted all the same
    return client.post(f"/api/approvals/{approval.pk}/decision/", body, format="json")


def test_decisions_beyond_the_limit_get_429_with_retry_after(settings, demo_policy, bob, approval):
    throttle_rates(settings, decide="3/minute")
    client = _api_for(bob)

    answers = [_decide_api(client, approval).status_code for _ in range(4)]

    assert answers == [409, 409, 409, 429]
    response = _decide_api(client, approval)
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 60
    assert set(response.json()) == {"detail", "errors"}
    assert "throttled" in response.json()["detail"]


def test_the_limit_is_per_person(settings, demo_policy, bob, carol, approval):
    throttle_rates(settings, decide="2/minute")
    as_bob, as_carol = _api_for(bob), _api_for(carol)
    for _ in range(2):
        _decide_api(as_bob, approval)

    assert _decide_api(as_bob, approval).status_code == 429
    assert _decide_api(as_carol, approval).status_code == 409


def test_the_decision_page_shares_the_api_count(settings, demo_policy, bob, approval):
    throttle_rates(settings, decide="2/minute")
    client = _api_for(bob)
    for _ in range(2):
        _decide_api(client, approval)

    response = client_for(bob).post(
        reverse("approvals:decide", args=[approval.pk]),
        {"decision": "approve", "seen_hash": approval.payload_hash},
    )

    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 60
    assert "Too many decisions" in response.content.decode()
    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.PENDING


def test_other_api_calls_do_not_spend_the_decision_count(settings, demo_policy, bob, approval):
    throttle_rates(settings, decide="1/minute")
    client = _api_for(bob)
    for _ in range(3):
        assert client.get(f"/api/approvals/{approval.pk}/").status_code == 200

    assert _decide_api(client, approval).status_code == 409
