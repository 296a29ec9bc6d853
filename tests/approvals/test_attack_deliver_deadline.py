"""Attack: one delivery task now carries every row a transaction wrote (a sweep chunk: up to
50 approvals times their recipients) and sends them one after another. Each send may take up
to WEBHOOK_TIMEOUT_SECONDS, so a batch task of slow sends runs past the task timeout
(Q_TIMEOUT): django-q2 kills it mid-send, and the row in flight (claimed, maybe received by
the endpoint) is sent again by the sweep once its claim lapses. Before, one row per task could
never reach the timeout. DESIGN: "Give every step a deadline well below the task timeout."
"""

from __future__ import annotations

import datetime as dt

import time_machine
from django.conf import settings
from django.db import transaction

from approvals import notifications, tasks
from approvals.models import Notification
from tests.support.approvals import request_approval
from tests.support.queue import tasks_named

DELIVER_MANY = "approvals.tasks.notifications_deliver"
T0 = dt.datetime(2030, 1, 1, 9, 0, tzinfo=dt.UTC)


def test_a_batch_delivery_task_stays_well_inside_the_task_timeout(
    demo_policy, alice, queued, django_capture_on_commit_callbacks, monkeypatch
):
    with time_machine.travel(T0, tick=False) as clock:
        with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
            for _ in range(6):
                request_approval(requester=alice, tier="write")  # bob and carol each
        (task,) = tasks_named(queued, DELIVER_MANY)
        ids = list(task[1])
        assert len(ids) == 12
        queued.reset_mock()

        started = []

        def slow_send(row):  # an endpoint / mail server that answers at the timeout
            started.append(dt.datetime.now(dt.UTC))
            clock.shift(dt.timedelta(seconds=notifications.WEBHOOK_TIMEOUT_SECONDS))

        monkeypatch.setattr(notifications, "_send", slow_send)
        begin = dt.datetime.now(dt.UTC)
        tasks.notifications_deliver(ids)
        # The last send this task started must end well before django-q2 kills the task.
        last_end = started[-1] + dt.timedelta(seconds=notifications.WEBHOOK_TIMEOUT_SECONDS)
        assert (last_end - begin).total_seconds() < settings.Q_TIMEOUT, (
            f"{len(started)} sends in one task: {(last_end - begin).total_seconds()} s "
            f"> Q_TIMEOUT {settings.Q_TIMEOUT} s"
        )
        # Nothing lost: every row was sent, or is queued in a follow-up task.
        sent = set(
            Notification.objects.filter(pk__in=ids, status="sent").values_list("id", flat=True)
        )
        later = {pk for call in tasks_named(queued, DELIVER_MANY) for pk in call[1]}
        assert sent | later == set(ids)
        assert not sent & later
