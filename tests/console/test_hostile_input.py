"""Hostile bodies get a 400 naming the field, never a 500."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from audit.canonical import payload_hash
from core.sealed_fields import field_seal
from tests.support.people import DECIDE, person, rest_client_for
from tests.support.probes import ProbeApprovalFactory

# Every task enqueued is recorded, none runs.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("queued")]


def test_a_nul_character_in_run_input_is_a_400(api_probe, alice):
    response = rest_client_for(alice).post(
        "/api/runs/",
        {
            "agent": api_probe.name,
            "input": {"service": "a\x00b", "signal": "x", "severity": "sev2"},
        },
        format="json",
    )
    assert response.status_code == 400
    assert "input" in response.json()["errors"]


def test_a_nul_character_in_edited_args_is_a_400(api_probe, alice):
    approval = ProbeApprovalFactory(run__requested_by=alice)
    response = rest_client_for(person("rita", perms=[DECIDE])).post(
        f"/api/approvals/{approval.id}/decision/",
        {
            "decision": "edit",
            "payload_hash": approval.payload_hash,
            "args": {"order_id": "A\x00", "amount": 1},
        },
        format="json",
    )
    assert response.status_code == 400
    assert "args" in response.json()["errors"]


def test_json_nested_too_deep_is_a_400(alice):
    body = "[" * 5000 + "]" * 5000
    response = rest_client_for(alice).generic(
        "POST", "/api/runs/", body, content_type="application/json"
    )
    assert response.status_code == 400


def test_an_invalid_args_schema_from_the_agent_makes_edits_a_400(api_probe, alice):
    approval = ProbeApprovalFactory(run__requested_by=alice)
    payload = {**approval.payload, "args_schema": {"type": "objekt"}}
    ApprovalRequest.objects.filter(pk=approval.pk).update(  # an update() takes sealed values
        payload=field_seal(ApprovalRequest, "payload", approval.run_id, payload),
        payload_hash=payload_hash(payload),
    )
    approval.refresh_from_db()
    response = rest_client_for(person("rita", perms=[DECIDE])).post(
        f"/api/approvals/{approval.id}/decision/",
        {
            "decision": "edit",
            "payload_hash": approval.payload_hash,
            "args": {"order_id": "A", "amount": 1},
        },
        format="json",
    )
    assert response.status_code == 400
    assert "args" in response.json()["errors"]
