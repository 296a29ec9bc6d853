"""The ``approval.wait`` span: from the approval's creation to its final outcome, once that
outcome is committed, kept out of latency SLOs. A decision by people, an expiry by the sweep,
a cancelled run."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.db import transaction

from agents.services import run_cancel
from approvals.models import ApprovalRequest
from approvals.services import approvals_sweep
from tests.support.approvals import decide, request_approval
from tests.support.traces import spans_recorded

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2030, 1, 1, 9, 0, tzinfo=dt.UTC)


@pytest.fixture
def spans():
    with spans_recorded() as recorded:
        yield recorded


def _ns(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


def _waits(spans) -> dict[int, object]:
    return {span.attributes["approval.id"]: span for span in spans.named("approval.wait")}


def test_a_quorum_decision_leaves_one_wait_from_creation_to_the_final_vote(
    demo_policy, alice, bob, carol, spans, django_capture_on_commit_callbacks
):
    with time_machine.travel(T0, tick=False) as clock:
        approval = request_approval(requester=alice, tier="critical")
        clock.shift(dt.timedelta(minutes=2))
        with django_capture_on_commit_callbacks(execute=True):
            decide(approval, bob)
        assert spans.named("approval.wait") == []  # one of two votes: still waiting
        clock.shift(dt.timedelta(minutes=3))
        with django_capture_on_commit_callbacks(execute=True):
            decide(approval, carol)
    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.APPROVED
    (wait,) = spans.named("approval.wait")
    assert wait.parent is None
    assert wait.start_time == _ns(approval.created_at) == _ns(T0)
    assert wait.end_time == _ns(approval.decided_at) == _ns(T0 + dt.timedelta(minutes=5))
    assert wait.attributes["approval.decision"] == "approve"
    assert wait.attributes["approval.status"] == "approved"
    assert wait.attributes["approval.tier"] == "critical"
    assert wait.attributes["approver.role"] == "approvers-critical,approvers-write"  # carol's
    assert wait.attributes["tool"] == approval.tool
    assert wait.attributes["slo.exclude"] is True


def test_expiries_by_the_sweep_leave_waits_by_system_timeout(
    demo_policy, alice, spans, django_capture_on_commit_callbacks
):
    with time_machine.travel(T0, tick=False) as clock:
        first = request_approval(requester=alice, tier="write")
        second = request_approval(requester=alice, tier="write")
        clock.shift(dt.timedelta(minutes=21))
        with django_capture_on_commit_callbacks(execute=True):
            assert approvals_sweep()["expired"] == 2
    waits = _waits(spans)
    assert set(waits) == {first.id, second.id}
    for approval in (first, second):
        approval.refresh_from_db()
        wait = waits[approval.id]
        assert wait.attributes["approver.role"] == "system:timeout"
        assert wait.attributes["approval.decision"] == "reject"  # the write tier's default
        assert wait.attributes["approval.status"] == "expired"
        assert wait.start_time == _ns(approval.created_at)
        assert wait.end_time == _ns(approval.decided_at) == _ns(T0 + dt.timedelta(minutes=21))


def test_a_cancelled_run_closes_its_waits_by_system_cancel(
    demo_policy, alice, spans, django_capture_on_commit_callbacks
):
    approval = request_approval(requester=alice, tier="write")
    with django_capture_on_commit_callbacks(execute=True):
        run_cancel(run=approval.run, user=alice)
    approval.refresh_from_db()
    (wait,) = spans.named("approval.wait")
    assert wait.attributes["approval.id"] == approval.id
    assert wait.attributes["approver.role"] == "system:cancel"
    assert wait.attributes["approval.decision"] == "reject"
    assert wait.end_time == _ns(approval.decided_at)


def test_a_decision_that_rolls_back_leaves_no_wait(
    demo_policy, alice, bob, spans, django_capture_on_commit_callbacks
):
    approval = request_approval(requester=alice, tier="write")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with pytest.raises(RuntimeError), transaction.atomic():
            decide(approval, bob)
            raise RuntimeError("the request failed after the decision")
        decide(approval, bob)  # the same decision, committed this time
    assert callbacks
    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.APPROVED
    (wait,) = spans.named("approval.wait")  # the committed one only
    assert wait.end_time == _ns(approval.decided_at)
