"""What a sweep chunk waits for: never a row a decision holds while the chunk holds that
decision's run.

A chunk locks its approvals and their runs in one ``SELECT ... FOR UPDATE``, row after row; a
decision locks its approval, then its run. With two due approvals of one run (a batched
interrupt), a chunk that took the first approval and the run, then wanted the second, and a
decision that took the second and wanted the run, waited on each other: Postgres broke the
cycle by failing one of them (a 500 on the decision, or a lost sweep pass).
"""

from __future__ import annotations

import datetime as dt
import threading
import time

import psycopg
import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.services import approvals_sweep
from approvals.services.decisions import approval_decide
from tests.support.people import DECIDE, person
from tests.support.probes import ProbeApprovalFactory, ProbeRunFactory

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="Postgres only: SQLite has no row locks (IMMEDIATE transactions lock the database)",
)


def _waiting_on_a_lock(count: int, *, timeout: float = 3.0) -> None:
    """Until ``count`` other sessions wait on a row lock (or ``timeout``: a sweep that waits
    for no lock has nothing to wait for)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(**connection.get_connection_params()) as probe:
        while time.monotonic() < deadline:
            (waiting,) = probe.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"
            ).fetchone()
            if waiting >= count:
                return
            time.sleep(0.02)


def _in_thread(errors: list[BaseException], work) -> threading.Thread:
    def run() -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_sweep_and_a_decision_on_two_approvals_of_one_run_do_not_deadlock(
    transactional_db, queued
):
    reviewer = person("reviewer", perms=[DECIDE])
    run = ProbeRunFactory(requested_by=person("requester", perms=[DECIDE]))
    due = timezone.now() - dt.timedelta(minutes=1)
    first, second = (
        ProbeApprovalFactory(run=run, action_index=index, escalate_at=due) for index in (0, 1)
    )
    errors: list[BaseException] = []
    # Another session holds the run, so the chunk stops after locking `first` and the decision
    # after locking `second`; once it lets go, each wants what the other holds.
    with psycopg.connect(**connection.get_connection_params()) as holder, holder.transaction():
        holder.execute("SELECT 1 FROM approvals_agentrun WHERE id = %s FOR UPDATE", [run.pk])
        sweep = _in_thread(errors, approvals_sweep)
        _waiting_on_a_lock(1)
        decide = _in_thread(
            errors,
            lambda: approval_decide(
                approval=second,
                user=reviewer,
                decision="approve",
                seen_hash=second.payload_hash,
            ),
        )
        _waiting_on_a_lock(2)
    sweep.join(timeout=30)
    decide.join(timeout=30)

    assert not sweep.is_alive() and not decide.is_alive()
    assert errors == []
    second.refresh_from_db()
    assert second.status == ApprovalRequest.Status.APPROVED
    approvals_sweep()  # what a pass left for the next one, the next one does
    first.refresh_from_db()
    assert first.escalated_at is not None


def test_a_sweep_chunk_acts_on_every_due_approval_of_one_run(transactional_db, queued):
    run = ProbeRunFactory(requested_by=person("requester", perms=[DECIDE]))
    due = timezone.now() - dt.timedelta(minutes=1)
    approvals = [
        ProbeApprovalFactory(run=run, action_index=index, escalate_at=due) for index in range(3)
    ]

    assert approvals_sweep()["escalated"] == 3
    for approval in approvals:
        approval.refresh_from_db()
        assert approval.escalated_at is not None


@pytest.mark.parametrize("field", ["remind_at", "escalate_at", "expires_at"])
def test_a_chunk_takes_the_chains_lock_last_so_other_writers_wait_only_for_its_insert(
    transactional_db, queued, field
):
    """Every audit writer (decisions, workers) waits for the chain's lock, which a chunk holds
    from its events to its commit: with chunks of up to CHUNK rows, nothing else comes after."""
    requester = person("requester", perms=[DECIDE])
    due = timezone.now() - dt.timedelta(minutes=1)
    for _ in range(3):
        ProbeApprovalFactory(run=ProbeRunFactory(requested_by=requester), **{field: due})
    with CaptureQueriesContext(connection) as captured:
        assert sum(approvals_sweep().values()) == 3
    statements = [query["sql"] for query in captured.captured_queries]
    lock = next(i for i, sql in enumerate(statements) if "pg_advisory_xact_lock" in sql)
    assert statements[lock + 1].startswith('INSERT INTO "audit_auditevent"')
    assert statements[lock + 2] == "COMMIT"
