"""Attack: two sweep passes at once (the schedule fired on two workers) over more than a chunk
of due approvals of every kind, with decisions interleaved: each outcome once, each event once,
the rollups equal a rebuild, the chain verifies."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.db import connection, connections
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.rollup_models import MetricsCount
from approvals.rollup_rebuild import rollups_rebuild
from approvals.services import approvals_sweep
from approvals.services.decisions import approval_decide
from audit.models import AuditEvent
from audit.verify import chain_verify_db
from tests.support.people import DECIDE, person
from tests.support.probes import ProbeApprovalFactory, ProbeRunFactory

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks")


def test_two_concurrent_sweeps_and_decisions_act_once(transactional_db, queued):
    requester = person("requester", perms=[DECIDE])
    reviewer = person("reviewer", perms=[DECIDE])
    due = timezone.now() - dt.timedelta(minutes=1)
    expiring, others = [], []
    for _ in range(70):
        run = ProbeRunFactory(requested_by=requester)
        expiring.append(ProbeApprovalFactory(run=run, expires_at=due))
    for n in range(60):
        run = ProbeRunFactory(requested_by=requester)
        field = "remind_at" if n % 2 else "escalate_at"
        others.append(ProbeApprovalFactory(run=run, **{field: due}))
    errors: list[BaseException] = []
    results: list[dict] = []
    barrier = threading.Barrier(3)

    def sweep() -> None:
        barrier.wait()
        results.append(approvals_sweep())

    def decisions() -> None:
        barrier.wait()
        for approval in others[::5]:
            approval.refresh_from_db()
            try:
                approval_decide(
                    approval=approval,
                    user=reviewer,
                    decision="approve",
                    seen_hash=approval.payload_hash,
                )
            except Exception as exc:  # noqa: BLE001
                if type(exc).__name__ not in ("DecisionConflict", "Conflict"):
                    errors.append(exc)

    threads = []
    for work in (sweep, sweep, decisions):

        def run(work=work):
            try:
                work()
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
            finally:
                connections.close_all()

        thread = threading.Thread(target=run)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert sum(r["expired"] for r in results) == 70
    for action in ("approval.expired", "approval.reminded", "approval.escalated"):
        ids = list(AuditEvent.objects.filter(action=action).values_list("approval_id", flat=True))
        assert len(ids) == len(set(ids)), action
    assert AuditEvent.objects.filter(action="approval.expired").count() == 70
    assert ApprovalRequest.objects.filter(status="expired").count() == 70
    assert chain_verify_db().ok
    written = set(
        MetricsCount.objects.values_list(
            "level", "block", "dimension", "group_key", "outcome", "n", "escalated", "reminded"
        )
    )
    rollups_rebuild(progress=lambda line: None)
    assert (
        set(
            MetricsCount.objects.values_list(
                "level", "block", "dimension", "group_key", "outcome", "n", "escalated", "reminded"
            )
        )
        == written
    )
