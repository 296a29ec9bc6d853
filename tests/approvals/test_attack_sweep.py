"""Review attacks on the set-based sweep: mixed chunks, rollups vs the rebuild, exact decision
values written set-based, a decision after the sweep's claim, the chain."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from approvals.contract import RUN_ADVANCE_TASK
from approvals.models import AgentRun, ApprovalRequest, RiskTier
from approvals.rollup_models import MetricsBucket, MetricsCount
from approvals.rollup_rebuild import rollups_rebuild
from approvals.services import approvals_sweep
from audit.models import AuditEvent
from audit.verify import chain_verify_db
from tests.support.approvals import decide, request_approval
from tests.support.factories import RunFactory
from tests.support.queue import tasks_named

pytestmark = pytest.mark.usefixtures("queued")


def _cells() -> set[tuple]:
    counts = MetricsCount.objects.values_list(
        "level", "block", "dimension", "group_key", "outcome", "n", "escalated", "reminded"
    )
    buckets = MetricsBucket.objects.values_list(
        "level", "block", "dimension", "group_key", "bucket", "n"
    )
    return set(counts) | {("bucket", *row) for row in buckets}


def test_a_mixed_chunk_expires_counts_and_chains_like_single_expiries(
    demo_policy, alice, bob, queued
):
    RiskTier.objects.filter(name="critical").update(expiry_decision="approve")
    past = timezone.now() - dt.timedelta(seconds=1)
    shared = RunFactory(requested_by=alice)
    made = []
    for n, tier in enumerate(["write", "critical", "write", "critical", "write", "read"]):
        approval = request_approval(
            requester=alice,
            tier=tier,
            tool=f"tool_{n % 3}",
            run=shared if n < 2 else None,
            args={"order_id": 'A-"1"\\{x},NULL', "amount": 120, "note": "é \u2028 \\u0041"},
        )
        ApprovalRequest.objects.filter(pk=approval.pk).update(
            expires_at=past,
            escalated_at=past if n % 2 else None,
            reminded_at=past if n % 3 == 0 else None,
        )
        made.append(approval)
    decided = request_approval(requester=alice, tier="write")
    decide(decided, bob, decision="approve")

    assert approvals_sweep()["expired"] == len(made)
    for approval in made:
        approval.refresh_from_db()
        assert approval.status in ("expired", "approved")
        assert approval.status == ("approved" if approval.tier == "critical" else "expired")
        assert approval.decision["approval_id"] == approval.id
        assert approval.decision.get("args", approval.args) == approval.args
        assert approval.decided_by_id is None and approval.decided_by_label == "system:timeout"
    # the shared run woken once, every run flagged
    woken = [args[1] for args in tasks_named(queued, RUN_ADVANCE_TASK)]
    assert woken.count(str(shared.pk)) == 1
    assert all(
        AgentRun.objects.filter(pk__in={a.run_id for a in made}).values_list(
            "wake_requested", flat=True
        )
    )
    # an expired approval cannot be decided afterwards
    with pytest.raises(Exception):  # noqa: B017, PT011
        decide(made[0], bob, decision="approve")
    made[0].refresh_from_db()
    assert made[0].status == "expired"
    # one event per expiry, the chain verifies
    assert AuditEvent.objects.filter(action="approval.expired").count() == len(made)
    assert chain_verify_db().ok
    # the rollups the sweep wrote equal a rebuild's
    written = _cells()
    assert written
    rollups_rebuild(progress=lambda line: None)
    assert _cells() == written
