"""Attack (Postgres): the pending counts under concurrency. Writers insert, decide, escalate,
re-tier, move and delete approvals in their own transactions while two compactors fold the
deltas and a backfill counts everything again; afterwards the kept counts must equal a live
count, and nothing may deadlock or fail."""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest
from django.db import connection, transaction

from approvals.models import ApprovalRequest
from approvals.rollup_pending import pending_cells, pending_compact, pending_rebuild
from approvals.rollups import day_of
from tests.support.factories import ApprovalFactory, RunFactory


def live() -> Counter:
    found: Counter = Counter()
    for approval in ApprovalRequest.objects.filter(status="pending").select_related("run"):
        cell = (day_of(approval.created_at), approval.tier, approval.tool, approval.run.agent)
        found[cell, "n"] += 1
        found[cell, "escalated"] += approval.escalated_at is not None
        found[cell, "reminded"] += approval.reminded_at is not None
    return +found


def kept() -> Counter:
    found: Counter = Counter()
    for day, tier, tool, agent, n, escalated, reminded in pending_cells():
        cell = (day, tier, tool, agent)
        found[cell, "n"] += n
        found[cell, "escalated"] += escalated
        found[cell, "reminded"] += reminded
    return +found


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="Postgres concurrency")
def test_writers_compactors_and_a_backfill_at_once_keep_the_counts_right(transactional_db, alice):
    runs = [RunFactory(requested_by=alice, agent=a) for a in ("refund_agent", "ops_agent")]
    for run in runs:
        ApprovalFactory.create_batch(5, run=run)
    failures: list[BaseException] = []
    stop = threading.Event()

    def guarded(body):
        def target():
            try:
                body()
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)
            finally:
                connection.close()

        return threading.Thread(target=target)

    def writer(seed: int):
        rng = random.Random(seed)
        for step in range(60):
            with transaction.atomic():
                ids = list(
                    ApprovalRequest.objects.filter(status="pending").values_list("pk", flat=True)
                )
                pick = rng.choice(ids) if ids else None
                action = rng.randrange(6)
                if action == 0 or pick is None:
                    ApprovalFactory(run=rng.choice(runs), interrupt_id=f"w{seed}-{step}")
                    continue
                locked = ApprovalRequest.objects.select_for_update().filter(pk=pick)
                if action == 1:
                    locked.update(status="approved")
                elif action == 2:
                    locked.update(escalated_at=runs[0].created_at)
                elif action == 3:
                    locked.update(tier=rng.choice(["read", "write", "critical"]))
                elif action == 4:
                    locked.update(run=rng.choice(runs))
                else:
                    ApprovalRequest.objects.filter(pk=pick, votes__isnull=True).delete()

    def compactor():
        while not stop.is_set():
            pending_compact()

    def backfill():
        for _ in range(3):
            with transaction.atomic():
                pending_rebuild()

    writers = [guarded(lambda s=s: writer(s)) for s in range(4)]
    others = [guarded(compactor), guarded(compactor), guarded(backfill)]
    for thread in writers + others:
        thread.start()
    for thread in writers:
        thread.join(120)
    stop.set()
    for thread in others:
        thread.join(60)
    assert failures == []
    assert kept() == live()
    pending_compact()
    assert kept() == live()
