"""Every write of a run's or an approval's personal data stores it sealed (core/sealing.py):
the column read raw holds an envelope and never the plaintext, and the model reads it back."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from approvals.models import AgentRun, ApprovalRequest, ApprovalVote
from approvals.services import (
    approvals_sweep,
    run_create,
    run_mark_cancelled,
    run_mark_completed,
    run_mark_failed,
    run_record_failure,
)
from core.sealed_fields import field_seal
from core.sealing import MARKER, PlaintextRefused
from tests.support.approvals import decide, request_approval
from tests.support.factories import ApprovalFactory, RunFactory

pytestmark = pytest.mark.django_db

SECRET = "ada.lovelace@example.com"


def raw(model: type, column: str, pk: Any) -> str:
    """The column as stored, read with SQL (no field opens it)."""
    table = connection.ops.quote_name(model._meta.db_table)
    field = model._meta.get_field(column)
    pk_value = model._meta.pk.get_db_prep_value(pk, connection)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {connection.ops.quote_name(field.column)} FROM {table} WHERE id = %s",  # noqa: S608
            [pk_value],
        )
        (value,) = cursor.fetchone()
    return value if isinstance(value, str) else json.dumps(value)


def assert_sealed(model: type, column: str, pk: Any) -> None:
    stored = raw(model, column, pk)
    assert MARKER in stored, f"{model.__name__}.{column} is not sealed: {stored[:80]}"
    assert SECRET not in stored
    assert "ada.lovelace" not in stored


def test_a_new_run_stores_its_input_sealed_and_reads_it_back(alice):
    run = run_create(
        agent="refund_agent", graph_version="1", input={"email": SECRET}, requested_by=alice
    )
    assert_sealed(AgentRun, "input", run.pk)
    assert AgentRun.objects.get(pk=run.pk).input == {"email": SECRET}


def test_a_completed_run_stores_its_output_sealed(alice):
    run = RunFactory(requested_by=alice, status=AgentRun.Status.RUNNING)
    run_mark_completed(run=run, output={"sent_to": SECRET})
    assert_sealed(AgentRun, "output", run.pk)
    assert AgentRun.objects.get(pk=run.pk).output == {"sent_to": SECRET}


@pytest.mark.parametrize("dead", [False, True])
def test_a_failed_run_stores_its_error_sealed(alice, dead):
    run = RunFactory(requested_by=alice, status=AgentRun.Status.RUNNING)
    run_mark_failed(run=run, error=f"ValueError: no customer {SECRET}", dead=dead)
    assert_sealed(AgentRun, "error", run.pk)
    assert AgentRun.objects.get(pk=run.pk).error == f"ValueError: no customer {SECRET}"


def test_a_retried_failure_stores_its_error_sealed(alice):
    run = RunFactory(requested_by=alice, status=AgentRun.Status.RUNNING)
    moved = run_record_failure(run=run, error=f"TimeoutError: {SECRET}", retry_in=1.0)
    assert moved.error == f"TimeoutError: {SECRET}"  # the caller's copy keeps the plaintext
    assert_sealed(AgentRun, "error", run.pk)
    assert AgentRun.objects.get(pk=run.pk).error == f"TimeoutError: {SECRET}"


def test_a_requested_approval_stores_args_and_payload_sealed_and_hashes_the_plaintext(
    demo_policy, alice
):
    from audit.canonical import canonical_hash

    approval = request_approval(
        requester=alice, tier="write", args={"order_id": SECRET, "amount": 5}
    )
    assert_sealed(ApprovalRequest, "args", approval.pk)
    assert_sealed(ApprovalRequest, "payload", approval.pk)
    stored = ApprovalRequest.objects.get(pk=approval.pk)
    assert stored.args == {"order_id": SECRET, "amount": 5}
    assert stored.payload_hash == canonical_hash(stored.payload)  # the reviewer echoes the same


def test_a_decision_stores_the_vote_and_the_decision_sealed(demo_policy, alice, bob):
    approval = request_approval(requester=alice, tier="write")
    decide(approval, bob, "reject", message=f"call {SECRET} first")
    vote = ApprovalVote.objects.get(approval=approval)
    assert_sealed(ApprovalVote, "message", vote.pk)
    assert MARKER in raw(ApprovalVote, "args", vote.pk)
    assert_sealed(ApprovalRequest, "decision", approval.pk)
    assert ApprovalRequest.objects.get(pk=approval.pk).decision["message"] == f"call {SECRET} first"
    assert ApprovalVote.objects.get(pk=vote.pk).message == f"call {SECRET} first"


def test_an_edit_short_of_quorum_stores_the_new_round_sealed(demo_policy, alice, bob, carol):
    from approvals.models import RiskTier

    RiskTier.objects.filter(name="write").update(required_approvals=2)
    approval = request_approval(
        requester=alice, tier="write", args={"order_id": SECRET, "amount": 5}
    )
    decide(approval, bob, "edit", args={"order_id": SECRET, "amount": 4})
    stored = ApprovalRequest.objects.get(pk=approval.pk)
    assert stored.quorum_round == 1 and stored.original_args == {"order_id": SECRET, "amount": 5}
    for column in ("args", "payload", "original_args"):
        assert_sealed(ApprovalRequest, column, approval.pk)
    assert stored.args == {"order_id": SECRET, "amount": 4}


def test_an_edit_that_raises_the_tier_stores_its_payload_sealed(demo_policy, alice, carol):
    approval = request_approval(
        requester=alice, tier="write", args={"order_id": SECRET, "amount": 5}
    )
    decide(approval, carol, "edit", args={"order_id": SECRET, "amount": 900})
    stored = ApprovalRequest.objects.get(pk=approval.pk)
    assert stored.tier == "critical" and stored.payload["args"]["amount"] == 900
    for column in ("args", "payload", "original_args"):
        assert_sealed(ApprovalRequest, column, approval.pk)


def test_a_cancel_stores_the_closed_approvals_decision_sealed(demo_policy, alice):
    approval = request_approval(
        requester=alice, tier="write", args={"order_id": SECRET, "amount": 5}
    )
    run_mark_cancelled(run=approval.run, user=alice)
    assert_sealed(ApprovalRequest, "decision", approval.pk)
    stored = ApprovalRequest.objects.get(pk=approval.pk)
    assert stored.status == "expired" and stored.decision["args"]["order_id"] == SECRET


def test_the_sweep_stores_each_expired_decision_sealed(demo_policy, alice):
    """Postgres: the one json_to_recordset UPDATE; SQLite: bulk_update (both seal in Python)."""
    runs = [RunFactory(requested_by=alice) for _ in range(3)]
    approvals = [
        request_approval(
            requester=alice, tier=tier, run=run, args={"order_id": SECRET, "amount": i}
        )
        for i, (run, tier) in enumerate(zip(runs, ["write", "critical", "write"], strict=True))
    ]
    result = approvals_sweep(now=timezone.now() + dt.timedelta(days=2))
    assert result["expired"] == 3
    for i, approval in enumerate(approvals):
        assert_sealed(ApprovalRequest, "decision", approval.pk)
        stored = ApprovalRequest.objects.get(pk=approval.pk)
        assert stored.decision["args"] == {"order_id": SECRET, "amount": i}
        assert stored.decision["by"] == "system:timeout"


def test_update_and_bulk_update_with_plaintext_are_refused(alice):
    run = RunFactory(requested_by=alice)
    approval = ApprovalFactory(run=run)
    # Each in its savepoint: a refused statement breaks the transaction it ran in.
    with pytest.raises(PlaintextRefused), transaction.atomic():
        AgentRun.objects.filter(pk=run.pk).update(output={"to": SECRET})
    with pytest.raises(PlaintextRefused), transaction.atomic():
        AgentRun.objects.filter(pk=run.pk).update(error=SECRET)
    with pytest.raises(PlaintextRefused), transaction.atomic():
        AgentRun.objects.filter(pk=run.pk).update(pending_migration={"to": SECRET})
    approval.decision = {"message": SECRET}
    with pytest.raises(PlaintextRefused), transaction.atomic():
        ApprovalRequest.objects.bulk_update([approval], ["decision"])
    with pytest.raises(PlaintextRefused), transaction.atomic():
        ApprovalRequest.objects.filter(pk=approval.pk).update(args={"order_id": SECRET})
    # Sealed, the same statements go through.
    AgentRun.objects.filter(pk=run.pk).update(
        output=field_seal(AgentRun, "output", run.pk, {"to": SECRET})
    )
    assert AgentRun.objects.get(pk=run.pk).output == {"to": SECRET}


def test_a_filter_on_a_sealed_column_is_refused(alice):
    RunFactory(requested_by=alice, input={"email": SECRET})
    with pytest.raises(PlaintextRefused):
        list(AgentRun.objects.filter(input={"email": SECRET}))
