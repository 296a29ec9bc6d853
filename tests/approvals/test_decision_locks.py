"""What a decision locks: the approval and its run, never the requester's user row.

``select_for_update()`` with ``select_related`` locks every joined row. Locking the requester's
``auth_user`` row made a decision and that requester's next ``POST /api/runs/`` deadlock on
Postgres: the new run's foreign-key check (``FOR KEY SHARE`` on the user, at commit, after
its audit event took the chain lock) waited for the decision, which waited for the chain
lock to record its own audit event (found by bench/throughput.py, a 500 on the start).
"""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from approvals.services import decisions
from approvals.services.decisions import approval_decide
from tests.support.people import DECIDE, person
from tests.support.probes import ProbeApprovalFactory, ProbeRunFactory

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="Postgres only: SQLite has no row locks (IMMEDIATE transactions lock the database)",
)


def test_a_decision_leaves_the_requester_free_to_start_runs(transactional_db, queued, monkeypatch):
    requester = person("requester", perms=[DECIDE])
    reviewer = person("reviewer", perms=[DECIDE])
    approval = ProbeApprovalFactory(run=ProbeRunFactory(requested_by=requester))
    seen: list[str] = []
    record = decisions.event_record

    def while_locked(**kwargs):
        # Inside the decision's transaction, after its row locks: what a run start needs.
        if not seen:
            with psycopg.connect(**connection.get_connection_params()) as other:
                try:
                    other.execute(
                        "SELECT 1 FROM auth_user WHERE id = %s FOR KEY SHARE NOWAIT",
                        [requester.pk],
                    )
                    seen.append("free")
                except psycopg.errors.LockNotAvailable:
                    seen.append("locked")
        return record(**kwargs)

    monkeypatch.setattr(decisions, "event_record", while_locked)
    approval_decide(
        approval=approval, user=reviewer, decision="approve", seen_hash=approval.payload_hash
    )

    assert seen == ["free"]


def test_a_decision_still_locks_its_approval_and_run(transactional_db, queued, monkeypatch):
    requester = person("requester", perms=[DECIDE])
    reviewer = person("reviewer", perms=[DECIDE])
    approval = ProbeApprovalFactory(run=ProbeRunFactory(requested_by=requester))
    seen: list[tuple[str, str]] = []
    record = decisions.event_record

    def while_locked(**kwargs):
        if not seen:
            with psycopg.connect(**connection.get_connection_params()) as other:
                for table, pk in (
                    ("approvals_approvalrequest", approval.pk),
                    ("approvals_agentrun", approval.run_id),
                ):
                    try:
                        with other.transaction():
                            other.execute(
                                f"SELECT 1 FROM {table} WHERE id = %s FOR UPDATE NOWAIT", [pk]
                            )
                        seen.append((table, "free"))
                    except psycopg.errors.LockNotAvailable:
                        seen.append((table, "locked"))
        return record(**kwargs)

    monkeypatch.setattr(decisions, "event_record", while_locked)
    approval_decide(
        approval=approval, user=reviewer, decision="approve", seen_hash=approval.payload_hash
    )

    assert seen == [("approvals_approvalrequest", "locked"), ("approvals_agentrun", "locked")]
