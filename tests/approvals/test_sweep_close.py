"""The expiries' close on Postgres: one UPDATE per chunk writes each row's status and decision
and the shared fields (each row gets one new version, not two), with both outcomes."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.utils import timezone

from approvals.models import ApprovalRequest, RiskTier
from approvals.services import approvals_sweep
from tests.support.approvals import request_approval

pytestmark = pytest.mark.django_db


def _expiring(alice) -> list[ApprovalRequest]:
    RiskTier.objects.filter(name="critical").update(expiry_decision="approve")
    approvals = [request_approval(requester=alice, tier="write") for _ in range(3)]
    approvals += [request_approval(requester=alice, tier="critical") for _ in range(2)]
    past = timezone.now() - dt.timedelta(minutes=1)
    ApprovalRequest.objects.filter(pk__in=[a.pk for a in approvals]).update(
        expires_at=past, remind_at=None, escalate_at=None
    )
    return approvals


def test_expired_rows_are_closed_with_their_own_outcome_and_decision(demo_policy, alice):
    approvals = _expiring(alice)
    before = timezone.now()
    assert approvals_sweep()["expired"] == 5
    for approval in approvals:
        approval.refresh_from_db()
        approve = approval.tier == "critical"
        assert approval.status == ("approved" if approve else "expired")
        assert approval.decided_by_id is None
        assert approval.decided_by_label == "system:timeout"
        assert approval.decided_at >= before
        assert approval.remind_at is None and approval.escalate_at is None
        assert approval.decision["decision"] == ("approve" if approve else "reject")
        assert approval.decision["approval_id"] == approval.pk
        assert approval.decision["decided_at"] == approval.decided_at.isoformat()
        assert approval.decision["args"] == approval.args


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the Postgres UPDATE")
def test_a_chunk_of_expiries_is_closed_with_one_update(demo_policy, alice):
    _expiring(alice)
    updates: list[str] = []

    def capture(execute, sql, params, many, context):
        if sql.lstrip().upper().startswith('UPDATE "APPROVALS_APPROVALREQUEST"'):
            updates.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        assert approvals_sweep()["expired"] == 5
    assert len(updates) == 1
