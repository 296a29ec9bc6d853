"""A run whose data key's master key was removed from ENCRYPTION_KEYS: its pages and the API
say its data cannot be read, naming the variable, and nothing answers 500."""

from __future__ import annotations

import base64
import os

import pytest
from django.urls import reverse

from tests.agents.test_erased import demo_policy  # noqa: F401
from tests.support.approvals import request_approval
from tests.support.factories import RunFactory
from tests.support.people import client_for, rest_client_for

pytestmark = pytest.mark.django_db

SECRET = "grace.hopper@example.com"


def _ring() -> str:
    return "k1:" + base64.b64encode(os.urandom(32)).decode()


@pytest.fixture
def key_gone(demo_policy, alice, settings):  # noqa: F811
    """Alice's run with an approval naming SECRET; then k1, which wraps its data key, removed."""
    settings.ENCRYPTION_KEYS = _ring()
    run = RunFactory(requested_by=alice, input={"email": SECRET})
    approval = request_approval(
        requester=alice, tier="write", run=run, args={"order_id": SECRET, "amount": 5}
    )
    settings.ENCRYPTION_KEYS = _ring().replace("k1:", "k2:")
    return run, approval


def test_a_run_whose_master_key_is_gone_reads_as_unreadable_never_a_500(key_gone, alice, bob):
    run, approval = key_gone

    pages = [
        (client_for(alice), reverse("agents:run", args=[run.pk])),
        (client_for(bob), reverse("approvals:detail", args=[approval.pk])),
        (rest_client_for(alice), f"/api/runs/{run.pk}/"),
        (rest_client_for(bob), f"/api/approvals/{approval.pk}/"),
        (client_for(bob), reverse("approvals:queue")),
    ]
    for client, url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        body = response.content.decode()
        assert SECRET not in body, url
    run_page = client_for(alice).get(reverse("agents:run", args=[run.pk])).content.decode()
    assert "ENCRYPTION_KEYS" in run_page and "cannot be read" in run_page


def test_an_approval_whose_data_cannot_be_read_cannot_be_decided(key_gone, bob):
    _, approval = key_gone
    response = rest_client_for(bob).post(
        f"/api/approvals/{approval.pk}/decision/",
        {"decision": "approve", "payload_hash": approval.payload_hash},
        format="json",
    )
    assert response.status_code == 409, response.content
    assert response.json()["reason"] == "unreadable"
    assert "ENCRYPTION_KEYS" in response.json()["detail"]
