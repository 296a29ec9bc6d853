"""Stuck runs and queues: raised once (an item, an audit event, notifications) across sweeps,
cleared when they move again (approvals/services/stuck.py)."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine

from approvals import tasks
from approvals.models import AgentRun, Notification, RiskTier, StuckItem
from approvals.services.stuck import _raise, stuck_sweep
from audit.models import AuditEvent
from tests.support.approvals import decide, request_approval
from tests.support.factories import RunFactory

T0 = dt.datetime(2030, 1, 1, 9, 0, tzinfo=dt.UTC)
Kind = StuckItem.Kind


@pytest.fixture
def operator(admin):
    """Stuck notifications go to the administrators (staff) by email."""
    return admin


def _stuck_mail(key: str) -> list[str]:
    return list(
        Notification.objects.filter(
            event=Notification.Event.STUCK, channel=Notification.Channel.EMAIL, text__contains=key
        ).values_list("recipient", flat=True)
    )


def _events(action: str) -> int:
    return AuditEvent.objects.filter(action=action).count()


def test_a_waiting_run_with_no_pending_approval_is_escalated_once_and_clears(alice, operator):
    with time_machine.travel(T0, tick=False) as clock:
        run = RunFactory(requested_by=alice, status=AgentRun.Status.WAITING)
        clock.shift(dt.timedelta(minutes=2))
        assert stuck_sweep()["stuck_raised"] == 0  # within the grace: maybe about to move
        clock.shift(dt.timedelta(minutes=4))
        first, second = stuck_sweep(), stuck_sweep()
        item = StuckItem.objects.get()
        assert (item.kind, item.key, item.run_id) == (Kind.ORPHANED_INTERRUPT, str(run.pk), run.pk)
        assert (first["stuck_raised"], second["stuck_raised"]) == (1, 0)
        assert _stuck_mail(str(run.pk)) == [operator.email]
        assert _events("stuck.raised") == 1
        # It moves again: an approval now waits for a person.
        request_approval(requester=alice, tier="write", run=run)
        assert stuck_sweep() == {"stuck_raised": 0, "stuck_cleared": 1}
        assert stuck_sweep() == {"stuck_raised": 0, "stuck_cleared": 0}
    item.refresh_from_db()
    assert item.cleared_at == T0 + dt.timedelta(minutes=6)
    assert _events("stuck.cleared") == 1
    assert len(_stuck_mail(str(run.pk))) == 1


def test_a_flagged_or_woken_waiting_run_is_not_an_orphaned_interrupt(alice, operator):
    with time_machine.travel(T0, tick=False) as clock:
        RunFactory(requested_by=alice, status=AgentRun.Status.WAITING, flag="version skew")
        RunFactory(requested_by=alice, status=AgentRun.Status.WAITING, wake_requested=True)
        clock.shift(dt.timedelta(hours=1))
        assert stuck_sweep()["stuck_raised"] == 0
    assert not StuckItem.objects.exists()


def test_a_running_run_past_its_lease_is_escalated_once_and_clears_when_taken_over(alice, operator):
    with time_machine.travel(T0, tick=False) as clock:
        run = RunFactory(
            requested_by=alice,
            status=AgentRun.Status.RUNNING,
            lease_owner="host:1:dead",
            lease_expires_at=T0 + dt.timedelta(seconds=30),
        )
        clock.shift(dt.timedelta(minutes=3))
        assert stuck_sweep()["stuck_raised"] == 0  # lapsed, but recovery may still take it
        clock.shift(dt.timedelta(minutes=3))
        assert stuck_sweep()["stuck_raised"] == 1
        assert stuck_sweep()["stuck_raised"] == 0
        assert StuckItem.objects.get().kind == Kind.RUN_PAST_DEADLINE
        # A worker takes it over: a fresh lease.
        AgentRun.objects.filter(pk=run.pk).update(
            lease_owner="host:2:live", lease_expires_at=T0 + dt.timedelta(minutes=6, seconds=30)
        )
        assert stuck_sweep() == {"stuck_raised": 0, "stuck_cleared": 1}
    assert _events("stuck.raised") == _events("stuck.cleared") == 1
    assert len(_stuck_mail(str(run.pk))) == 1


def test_a_tier_queue_older_than_its_threshold_is_escalated_once_and_clears_when_decided(
    demo_policy, alice, bob, carol, operator
):
    RiskTier.objects.filter(name="write").update(stuck_after_seconds=600)
    with time_machine.travel(T0, tick=False) as clock:
        approval = request_approval(requester=alice, tier="write", ttl=dt.timedelta(hours=2))
        clock.shift(dt.timedelta(minutes=9))
        assert stuck_sweep()["stuck_raised"] == 0
        clock.shift(dt.timedelta(minutes=2))
        assert stuck_sweep()["stuck_raised"] == 1
        assert stuck_sweep()["stuck_raised"] == 0
        item = StuckItem.objects.get()
        assert (item.kind, item.key, item.run_id) == (Kind.QUEUE_TOO_OLD, "write", None)
        assert "threshold 600 s" in item.detail
        decide(approval, bob)
        assert stuck_sweep() == {"stuck_raised": 0, "stuck_cleared": 1}
    # The administrators and the tier's escalation group (carol's approvers-critical), once.
    assert sorted(_stuck_mail("write")) == sorted([operator.email, carol.email])
    event = AuditEvent.objects.get(action="stuck.raised")
    assert event.data["kind"] == Kind.QUEUE_TOO_OLD and event.data["tier"] == "write"


def test_a_tier_with_threshold_zero_is_never_stuck(demo_policy, alice, operator):
    RiskTier.objects.update(stuck_after_seconds=0)
    with time_machine.travel(T0, tick=False) as clock:
        request_approval(requester=alice, tier="write", ttl=dt.timedelta(days=3))
        clock.shift(dt.timedelta(days=2))
        assert stuck_sweep()["stuck_raised"] == 0


def test_a_run_stuck_again_after_it_cleared_is_escalated_again(alice, operator):
    with time_machine.travel(T0, tick=False) as clock:
        run = RunFactory(requested_by=alice, status=AgentRun.Status.WAITING)
        clock.shift(dt.timedelta(minutes=10))
        stuck_sweep()
        approval = request_approval(requester=alice, tier="write", run=run)
        stuck_sweep()  # cleared
        approval.delete()
        clock.shift(dt.timedelta(minutes=10))
        assert stuck_sweep()["stuck_raised"] == 1
    assert StuckItem.objects.filter(key=str(run.pk)).count() == 2
    assert StuckItem.objects.filter(key=str(run.pk), cleared_at__isnull=True).count() == 1
    assert len(_stuck_mail(str(run.pk))) == 2


def test_an_item_another_sweep_raised_meanwhile_is_not_raised_twice(alice, operator):
    """Two sweeps at once: the second insert meets the open row (partial unique constraint)."""
    run = RunFactory(requested_by=alice)
    StuckItem.objects.create(
        kind=Kind.ORPHANED_INTERRUPT, key=str(run.pk), run=run, raised_at=T0, detail="first"
    )
    info = {"run": run, "tier": None, "detail": "second"}
    assert _raise(kind=Kind.ORPHANED_INTERRUPT, key=str(run.pk), info=info, now=T0) is False
    assert StuckItem.objects.count() == 1
    assert _events("stuck.raised") == 0
    assert not Notification.objects.filter(event=Notification.Event.STUCK).exists()


def test_the_every_minute_sweep_task_raises_stuck_items_too(alice, operator):
    with time_machine.travel(T0, tick=False) as clock:
        RunFactory(requested_by=alice, status=AgentRun.Status.WAITING)
        clock.shift(dt.timedelta(minutes=10))
        counts = tasks.approvals_sweep()
    assert counts["stuck_raised"] == 1
    assert {"expired", "escalated", "reminded", "retried", "stuck_cleared"} <= set(counts)
