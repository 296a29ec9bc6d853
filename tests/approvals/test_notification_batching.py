"""One delivery task per transaction: the rows a transaction wrote travel together, and each
row is still claimed on its own (a re-delivered task or a lost one sends nothing twice and
loses nothing)."""

from __future__ import annotations

import datetime as dt

import time_machine
from django.core import mail
from django.db import transaction

from approvals import tasks
from approvals.models import Notification
from approvals.notifications import CLAIM_SECONDS
from approvals.services import approvals_sweep
from tests.support.approvals import request_approval
from tests.support.queue import tasks_named

DELIVER = "approvals.tasks.notification_deliver"
DELIVER_MANY = "approvals.tasks.notifications_deliver"
T0 = dt.datetime(2030, 1, 1, 9, 0, tzinfo=dt.UTC)


def test_the_notifications_of_one_transaction_go_in_one_task(
    demo_policy, alice, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        first = request_approval(requester=alice, tier="write")
        second = request_approval(requester=alice, tier="write")
    rows = set(
        Notification.objects.filter(approval__in=[first, second]).values_list("id", flat=True)
    )
    assert len(rows) == 4  # bob and carol, for each of the two approvals
    (task,) = tasks_named(queued, DELIVER_MANY)
    assert sorted(task[1]) == sorted(rows)
    assert tasks_named(queued, DELIVER) == []

    assert tasks.notifications_deliver(list(task[1])) == {"sent": 4}
    assert len(mail.outbox) == 4
    assert set(Notification.objects.filter(pk__in=rows).values_list("status", flat=True)) == {
        "sent"
    }


def test_the_rows_of_a_rolled_back_savepoint_are_skipped_and_the_others_sent(
    demo_policy, alice, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        kept = request_approval(requester=alice, tier="write")
        try:
            with transaction.atomic():
                request_approval(requester=alice, tier="write")
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
    rows = set(Notification.objects.filter(approval=kept).values_list("id", flat=True))
    assert Notification.objects.count() == 2
    (task,) = tasks_named(queued, DELIVER_MANY)
    assert rows <= set(task[1])  # a rolled-back row's id may ride along: its claim finds nothing
    outcome = tasks.notifications_deliver(list(task[1]))
    assert outcome["sent"] == 2
    assert sorted(m.to[0] for m in mail.outbox) == ["bob@example.com", "carol@example.com"]


def test_a_savepoint_that_opened_the_batch_and_rolled_back_leaves_the_next_rows_a_task(
    demo_policy, alice, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        try:
            with transaction.atomic():
                request_approval(requester=alice, tier="write")
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
        kept = request_approval(requester=alice, tier="write")
    (task,) = tasks_named(queued, DELIVER_MANY)
    assert sorted(task[1]) == sorted(
        Notification.objects.filter(approval=kept).values_list("id", flat=True)
    )


def test_a_redelivered_batch_task_sends_nothing_twice(
    demo_policy, alice, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        request_approval(requester=alice, tier="write")
    (task,) = tasks_named(queued, DELIVER_MANY)
    assert tasks.notifications_deliver(list(task[1])) == {"sent": 2}
    assert tasks.notifications_deliver(list(task[1])) == {"skipped": 2}
    assert len(mail.outbox) == 2


def test_the_rows_of_a_lost_batch_task_are_retried_by_the_sweep(demo_policy, alice, queued):
    with time_machine.travel(T0, tick=False) as clock:
        approval = request_approval(requester=alice, tier="write")  # its task never runs
        rows = set(Notification.objects.filter(approval=approval).values_list("id", flat=True))
        clock.shift(dt.timedelta(seconds=CLAIM_SECONDS + 1))
        queued.reset_mock()
        approvals_sweep()
        assert {args[1] for args in tasks_named(queued, DELIVER)} == rows
        for pk in rows:
            assert tasks.notification_deliver(pk) == "sent"
    assert len(mail.outbox) == 2
