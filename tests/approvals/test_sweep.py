"""The sweep under a frozen clock: reminders, escalation, expiry, the race, the query count."""

from __future__ import annotations

import datetime as dt
import threading
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.models import ApprovalRequest, Notification
from approvals.permissions import user_may_decide
from approvals.services import DecisionConflict, approval_expire, approvals_sweep
from audit.models import AuditEvent
from tests.support.approvals import decide, request_approval
from tests.support.factories import RunFactory
from tests.support.queue import tasks_named

ADVANCE = "agents.tasks.run_advance"
T0 = dt.datetime(2030, 1, 1, 9, 0, tzinfo=dt.UTC)
NOTHING = {"expired": 0, "escalated": 0, "reminded": 0}


def sweep() -> dict[str, int]:
    """The approval steps of one sweep (notification retries are tested on their own)."""
    counts = approvals_sweep()
    counts.pop("retried")
    return counts


def emails(approval: ApprovalRequest, event: str) -> set[str]:
    return set(
        Notification.objects.filter(
            approval=approval, event=event, channel=Notification.Channel.EMAIL
        ).values_list("recipient", flat=True)
    )


def test_escalation_then_reminder_then_expiry_as_the_clock_moves(
    demo_policy, alice, queued, django_capture_on_commit_callbacks
):
    with time_machine.travel(T0, tick=False) as clock:
        approval = request_approval(requester=alice, tier="write")  # ttl 20, escalate 3, remind 15
        assert emails(approval, "request") == {"bob@example.com", "carol@example.com"}
        assert sweep() == NOTHING

        clock.shift(dt.timedelta(minutes=3))
        assert sweep()["escalated"] == 1
        approval.refresh_from_db()
        assert approval.escalated_at == timezone.now()
        assert emails(approval, "escalation") == {"carol@example.com"}  # approvers-critical
        assert sweep() == NOTHING  # once only

        clock.shift(dt.timedelta(minutes=12))
        assert sweep()["reminded"] == 1
        assert emails(approval, "reminder") == {"bob@example.com", "carol@example.com"}

        clock.shift(dt.timedelta(minutes=5) - dt.timedelta(seconds=1))
        assert sweep() == NOTHING
        clock.shift(dt.timedelta(seconds=1))
        with django_capture_on_commit_callbacks(execute=True):
            assert sweep()["expired"] == 1

    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.EXPIRED
    assert approval.decided_by_label == "system:timeout"
    assert approval.decision["decision"] == "reject"  # the tier's default on expiry
    assert approval.decision["by"] == "system:timeout"
    assert approval.decision["approval_id"] == approval.id
    assert tasks_named(queued, ADVANCE) == [(ADVANCE, str(approval.run_id))]
    assert emails(approval, "expiry") == {"alice@example.com"}  # the requester
    actions = list(
        AuditEvent.objects.filter(approval_id=approval.id)
        .order_by("seq")
        .values_list("action", flat=True)
    )
    assert actions == [
        "approval.requested",
        "approval.escalated",
        "approval.reminded",
        "approval.expired",
    ]


def test_escalation_lets_the_escalation_group_decide(demo_policy, alice, bob, dave):
    dave.groups.add(demo_policy["incident-commanders"])
    with time_machine.travel(T0, tick=False) as clock:
        approval = request_approval(requester=alice, tier="critical")
        assert not user_may_decide(user=dave, approval=approval)[0]
        clock.shift(dt.timedelta(minutes=3))
        approvals_sweep()
        approval.refresh_from_db()
        assert user_may_decide(user=dave, approval=approval)[0]
        assert emails(approval, "escalation") == {"dave@example.com"}


def test_a_decided_approval_is_never_expired(demo_policy, alice, bob):
    with time_machine.travel(T0, tick=False) as clock:
        approval = request_approval(requester=alice, tier="write")
        decide(approval, bob)
        clock.shift(dt.timedelta(hours=1))
        assert sweep() == NOTHING
    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.APPROVED


def test_a_decision_after_expiry_gets_409(demo_policy, alice, bob):
    with time_machine.travel(T0, tick=False) as clock:
        approval = request_approval(requester=alice, tier="write")
        clock.shift(dt.timedelta(minutes=21))
        approvals_sweep()
        with pytest.raises(DecisionConflict) as exc:
            decide(approval, bob)
    assert exc.value.reason == "already_decided"


def test_manage_py_sweep_runs_the_sweep_once(demo_policy, alice):
    with time_machine.travel(T0, tick=False) as clock:
        approval = request_approval(requester=alice, tier="write")
        clock.shift(dt.timedelta(minutes=30))
        out = StringIO()
        call_command("sweep", stdout=out)
    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.EXPIRED
    assert "expired 1" in out.getvalue()
    assert "runs recovered" in out.getvalue()


def test_the_sweep_is_installed_as_a_schedule_every_minute(db):
    from django_q.models import Schedule

    schedule = Schedule.objects.get(func="approvals.tasks.approvals_sweep")
    assert (schedule.schedule_type, schedule.minutes, schedule.repeats) == ("I", 1, -1)


# --- the decision / expiry race --------------------------------------------------------------


@pytest.mark.parametrize("attempt", range(6))
def test_a_decision_racing_the_expiry_sweep_ends_in_exactly_one_outcome(
    transactional_db, demo_policy, alice, bob, queued, attempt
):
    approval = request_approval(requester=alice, tier="write", ttl=dt.timedelta(seconds=30))
    # The sweep's clock is past the expiry; the reviewer's is not: both may claim the row.
    sweep_now = approval.expires_at + dt.timedelta(seconds=1)
    barrier = threading.Barrier(2)
    results: dict[str, object] = {}

    def reviewer() -> None:
        try:
            barrier.wait(timeout=10)
            results["decide"] = decide(approval, bob).status
        except DecisionConflict as exc:
            results["decide"] = exc.reason
        except BaseException as exc:  # surfaced below
            results["decide_error"] = exc
        finally:
            connection.close()

    def sweeper() -> None:
        try:
            barrier.wait(timeout=10)
            results["expire"] = approval_expire(approval_id=approval.id, now=sweep_now)
        except BaseException as exc:  # surfaced below
            results["expire_error"] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=reviewer), threading.Thread(target=sweeper)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert "decide_error" not in results and "expire_error" not in results, results
    approval.refresh_from_db()
    if results["expire"]:
        assert results["decide"] == "already_decided"
        assert approval.status == ApprovalRequest.Status.EXPIRED
    else:
        assert results["decide"] == ApprovalRequest.Status.APPROVED
        assert approval.status == ApprovalRequest.Status.APPROVED
    finals = AuditEvent.objects.filter(
        approval_id=approval.id, action__in=["approval.decided", "approval.expired"]
    )
    assert finals.count() == 1
    assert tasks_named(queued, ADVANCE) == [(ADVANCE, str(approval.run_id))]


# --- the query count does not grow with the number of pending approvals ----------------------


def _pending(run, count: int, *, now: dt.datetime, tag: str) -> None:
    later = now + dt.timedelta(days=1)
    ApprovalRequest.objects.bulk_create(
        [
            ApprovalRequest(
                run=run,
                interrupt_id=f"{tag}-{n}",
                tool="refund_order",
                args={"order_id": f"B-{n}", "amount": 10},
                payload={},
                payload_hash="0" * 64,
                tier="write",
                expires_at=later,
                remind_at=later - dt.timedelta(minutes=5),
                escalate_at=later - dt.timedelta(hours=1),
            )
            for n in range(count)
        ],
        batch_size=2000,
    )


def _due_set(alice, *, now: dt.datetime) -> list[ApprovalRequest]:
    """One approval due for each step: reminder, escalation, expiry."""
    past = now - dt.timedelta(seconds=1)
    remind = request_approval(requester=alice, tier="write")
    escalate = request_approval(requester=alice, tier="write")
    expire = request_approval(requester=alice, tier="write")
    ApprovalRequest.objects.filter(pk=remind.pk).update(remind_at=past, escalate_at=None)
    ApprovalRequest.objects.filter(pk=escalate.pk).update(escalate_at=past, remind_at=None)
    ApprovalRequest.objects.filter(pk=expire.pk).update(expires_at=past)
    return [remind, escalate, expire]


def test_the_sweep_query_count_is_the_same_for_10_and_10000_pending(
    demo_policy, alice, django_assert_max_num_queries
):
    now = timezone.now()
    background = RunFactory(requested_by=alice)
    _pending(background, 10, now=now, tag="small")
    _due_set(alice, now=now)
    with CaptureQueriesContext(connection) as small:
        assert approvals_sweep() == {"expired": 1, "escalated": 1, "reminded": 1, "retried": 0}

    _pending(background, 9_990, now=now, tag="large")
    assert ApprovalRequest.objects.filter(status="pending").count() == 10_000 + 2
    _due_set(alice, now=now)
    with django_assert_max_num_queries(len(small)):
        assert approvals_sweep() == {"expired": 1, "escalated": 1, "reminded": 1, "retried": 0}
