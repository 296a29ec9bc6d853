"""A metric that cannot be written (the multiprocess directory full or read-only, a broken
mmap file) never breaks the work it measures: the decision is answered and its wake queued,
the notification is scheduled for its retry or marked failed, the advance returns its outcome."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine

from agents.runtime.advance import run_advance
from approvals import notifications
from approvals.models import ApprovalRequest, Notification
from approvals.notifications import notification_deliver
from core import prometheus
from tests.support.approvals import decide, request_approval
from tests.support.queue import tasks_named

pytestmark = pytest.mark.django_db
T0 = dt.datetime(2030, 1, 1, 9, 0, tzinfo=dt.UTC)


class _Unwritable:
    """A metric whose per-process file cannot be written (what prometheus_client raises when
    PROMETHEUS_MULTIPROC_DIR is full or read-only)."""

    def labels(self, **_labels):
        raise OSError(28, "No space left on device")


@pytest.fixture
def metrics_unwritable(monkeypatch):
    for name in ("DECISION_LATENCY", "ADVANCE_DURATION", "NOTIFICATION_FAILURES"):
        monkeypatch.setattr(prometheus, name, _Unwritable())


@pytest.mark.usefixtures("metrics_unwritable")
def test_a_decision_is_answered_and_its_run_woken_when_the_latency_histogram_cannot_be_written(
    demo_policy, alice, bob, queued, django_capture_on_commit_callbacks
):
    approval = request_approval(requester=alice, tier="write")
    queued.reset_mock()
    with django_capture_on_commit_callbacks(execute=True):
        decided = decide(approval, bob)

    assert decided.status == ApprovalRequest.Status.APPROVED
    assert ("agents.tasks.run_advance", str(approval.run_id)) in tasks_named(
        queued, "agents.tasks.run_advance"
    )


@pytest.mark.usefixtures("metrics_unwritable")
def test_a_failed_delivery_is_scheduled_for_retry_and_ends_failed_when_the_counter_cannot_be_written(
    demo_policy, alice, monkeypatch
):
    def broken_channel(row):
        raise ConnectionError("the mail server is down")

    monkeypatch.setattr(notifications, "_send", broken_channel)
    with time_machine.travel(T0, tick=False) as clock:
        approval = request_approval(requester=alice, tier="write")
        row = Notification.objects.filter(approval=approval).first()
        assert row is not None
        results = []
        for _ in range(notifications.MAX_ATTEMPTS):
            results.append(notification_deliver(notification_id=row.id))
            clock.shift(dt.timedelta(hours=1))
        # Failed for good: no further attempt, however long one waits.
        assert notification_deliver(notification_id=row.id) == "skipped: not due"

    assert results[0].startswith("retry in 30s: ConnectionError")
    assert results[-1].startswith("failed: ConnectionError")
    row.refresh_from_db()
    assert (row.status, row.attempts) == (Notification.Status.FAILED, notifications.MAX_ATTEMPTS)


@pytest.mark.usefixtures("metrics_unwritable")
def test_an_advance_returns_its_outcome_when_the_duration_histogram_cannot_be_written():
    outcome = run_advance(run_id="00000000-0000-0000-0000-000000000000")

    assert outcome == "skipped: leased elsewhere or unknown"
