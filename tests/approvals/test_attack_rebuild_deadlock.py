"""Attack: metrics_backfill (rollups_rebuild) now takes SHARE on approvals_agentrun at its end,
while it already holds EXCLUSIVE on the rollup tables. A run cancel updates the run first and
then counts its closed approvals in the rollups: lock-order inversion -> deadlock (one of the
two is aborted: the user's cancel 500s, or the backfill fails). Before the change the rebuild
only read the runs (ACCESS SHARE), so there was no cycle."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

import approvals.rollup_rebuild as rebuild
from approvals.models import AgentRun
from approvals.services.runs import run_mark_cancelled
from tests.support.pages import PageApprovalFactory, PageRunFactory


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="Postgres locks")
def test_backfill_and_a_cancel_at_once_both_succeed(transactional_db, alice, monkeypatch):
    run = PageRunFactory(requested_by=alice)
    PageApprovalFactory(run=run)
    rollups_locked, run_updated = threading.Event(), threading.Event()
    real_levels_above = rebuild._levels_above

    def levels_above():  # the rebuild holds EXCLUSIVE on the rollup tables here
        rollups_locked.set()
        run_updated.wait(10)
        time.sleep(0.5)  # the cancel has updated its run and waits for the rollup lock
        real_levels_above()

    monkeypatch.setattr(rebuild, "_levels_above", levels_above)
    failures: list[BaseException] = []

    def backfill():
        try:
            rebuild.rollups_rebuild(progress=lambda line: None)
        except BaseException as exc:
            failures.append(exc)
        finally:
            connection.close()

    def cancel():
        try:
            rollups_locked.wait(10)
            run_updated.set()
            run_mark_cancelled(run=run, user=alice)
        except BaseException as exc:
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=backfill), threading.Thread(target=cancel)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []
    assert AgentRun.objects.get(pk=run.pk).status == AgentRun.Status.CANCELLED
