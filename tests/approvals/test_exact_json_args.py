"""Invariant 15 for edited args: what the audit cannot hash exactly is a 400 naming the field,
anything else the API accepts round-trips and verifies; payload hashes are RFC 8785, and an
approval created under the old form stays decidable with the hash its reviewer saw."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals.models import ApprovalRequest
from audit.canonical import canonical_hash, canonical_parse, payload_hash
from audit.models import AuditEvent
from audit.private import event_data_open
from audit.verify import chain_verify_db, json_same
from tests.support.hypothesis_profiles import SLOW_IS_EXPECTED
from tests.support.json_values import TEXT, json_values
from tests.support.people import rest_client_for
from tests.support.probes import ProbeApprovalFactory, ProbeRunFactory

pytestmark = pytest.mark.usefixtures("queued")


def _free_approval(alice, **kwargs) -> ApprovalRequest:
    """A pending approval whose payload carries no args schema: any object is a valid edit."""
    return ProbeApprovalFactory(run=ProbeRunFactory(requested_by=alice), args_schema=None, **kwargs)


def _decide(client, approval, **body):
    body.setdefault("payload_hash", approval.payload_hash)
    return client.post(f"/api/approvals/{approval.id}/decision/", body, format="json")


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"order_id": "A-100", "amount": 2**53}, "args.amount"),
        ({"order_id": "A-100", "lines": [{"qty": -(2**60)}]}, "args.lines.0.qty"),
    ],
)
def test_edited_args_the_audit_cannot_hash_exactly_are_a_400_naming_the_field(
    alice, bob, args, field
):
    approval = _free_approval(alice)

    response = _decide(rest_client_for(bob), approval, decision="edit", args=args)

    assert response.status_code == 400, response.content
    assert set(response.json()["errors"]) == {field}
    approval.refresh_from_db()
    assert approval.is_pending


def test_a_form_encoded_infinity_in_edited_args_is_a_400_naming_the_field(alice, bob):
    approval = _free_approval(alice)
    body = {
        "decision": "edit",
        "payload_hash": approval.payload_hash,
        "args": '{"order_id": "A-100", "amount": 1e400}',
    }

    response = rest_client_for(bob).post(
        f"/api/approvals/{approval.id}/decision/", body, format="multipart"
    )

    assert response.status_code == 400, response.content
    assert set(response.json()["errors"]) == {"args.amount"}


def test_new_approvals_carry_the_rfc8785_hash_of_their_payload(alice):
    approval = _free_approval(alice, args={"order_id": "A-100", "amount": 12.0})
    approval.refresh_from_db()

    assert approval.payload_hash == canonical_hash(approval.payload)


@pytest.mark.parametrize("decision", ["approve", "edit"])
def test_an_approval_hashed_in_the_old_form_is_decided_with_the_hash_its_reviewer_saw(
    alice, bob, decision
):
    approval = _free_approval(alice, args={"order_id": "A-100", "amount": 12.0})
    old_hash = payload_hash(approval.payload)  # what it was created with before RFC 8785
    ApprovalRequest.objects.filter(pk=approval.pk).update(payload_hash=old_hash)
    assert old_hash != canonical_hash(approval.payload)
    args = {"order_id": "A-100", "amount": 6.5} if decision == "edit" else None

    response = _decide(
        rest_client_for(bob), approval, decision=decision, args=args, payload_hash=old_hash
    )

    assert response.status_code == 200, response.content
    decided = AuditEvent.objects.get(action="approval.decided", approval_id=approval.pk)
    assert event_data_open(decided)["shown"]["payload_hash"] == old_hash
    assert chain_verify_db().ok


@settings(suppress_health_check=[*SLOW_IS_EXPECTED, HealthCheck.function_scoped_fixture])
@given(args=st.dictionaries(TEXT, json_values(), max_size=4))
def test_any_edited_args_the_api_accepts_round_trip_and_verify(alice, bob, args):
    approval = _free_approval(alice)

    response = _decide(rest_client_for(bob), approval, decision="edit", args=args)

    assert response.status_code == 200, response.content
    decided = AuditEvent.objects.get(action="approval.decided", approval_id=approval.pk)
    hashed = canonical_parse(decided.canonical)["data"]
    assert json_same(decided.data, hashed)  # the sealed keys' envelopes, as hashed
    assert json_same(event_data_open(decided)["final_args"], args)
    result = chain_verify_db()
    assert result.ok, result.reason


def test_an_order_id_no_double_equals_is_refused_never_recorded_as_its_neighbour(alice):
    # An agent's tool call may carry a 19-digit id (the API refuses such numbers from people).
    # RFC 8785 numbers are doubles: the nearest one is another order's id. The request is
    # refused, naming the field, and nothing is recorded.
    from audit.canonical import CanonicalError
    from tests.support.approvals import request_approval

    with pytest.raises(CanonicalError) as refused:
        request_approval(requester=alice, tier="write", args={"order_id": 1234567890123456789})

    assert "args.order_id" in str(refused.value)
    assert not AuditEvent.objects.filter(action="approval.requested").exists()
    # An integer a double does equal (what jsonb gives back for 1e21) is recorded as that double.
    approval = request_approval(requester=alice, tier="write", args={"order_id": 10**21})
    event = AuditEvent.objects.get(action="approval.requested", approval_id=approval.pk)
    assert json_same(event_data_open(event)["payload"]["args"]["order_id"], 10**21)
