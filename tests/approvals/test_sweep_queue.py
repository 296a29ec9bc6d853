"""Runs woken in bulk become ordinary django-q2 queue rows, written in one INSERT."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_q.conf import Conf
from django_q.models import OrmQ
from django_q.signing import SignedPackage

from approvals.contract import RUN_ADVANCE_TASK
from approvals.models import AgentRun
from approvals.services import wake
from approvals.services.wake import runs_advance_enqueue_many
from tests.support.queue import NOTIFICATION_MODULES, RUNNER_MODULES


@pytest.fixture
def queue_modules():
    """Runs woken in bulk reach the real ORM broker here (the rest are recorded)."""
    return tuple(m for m in (*RUNNER_MODULES, *NOTIFICATION_MODULES) if m is not wake)


def test_runs_woken_in_bulk_are_ordinary_queue_rows_written_in_one_insert(
    alice, settings, django_capture_on_commit_callbacks
):
    if not Conf.ORM:
        pytest.skip("the Redis broker is configured: no OrmQ rows")
    runs = AgentRun.objects.bulk_create(
        [
            AgentRun(
                id=(pk := uuid.uuid4()),
                thread_id=str(pk),
                agent="refund_agent",
                graph_version="1",
                requested_by=alice,
                status=AgentRun.Status.WAITING,
            )
            for _ in range(3)
        ]
    )
    with (
        CaptureQueriesContext(connection) as captured,
        django_capture_on_commit_callbacks(execute=True),
    ):
        runs_advance_enqueue_many(run_ids=[run.pk for run in runs])
    inserts = [q for q in captured if q["sql"].startswith('INSERT INTO "django_q_ormq"')]
    assert len(inserts) == 1
    rows = list(OrmQ.objects.all())
    assert len(rows) == 3
    tasks_ = [SignedPackage.loads(row.payload) for row in rows]
    assert {task["args"] for task in tasks_} == {(str(run.pk),) for run in runs}
    assert {(task["func"], task["group"]) for task in tasks_} == {(RUN_ADVANCE_TASK, "runs")}
    assert {row.key for row in rows} == {Conf.CLUSTER_NAME}
    assert set(AgentRun.objects.filter(wake_requested=True).values_list("pk", flat=True)) == {
        run.pk for run in runs
    }
