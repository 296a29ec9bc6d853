"""The sweep and recovery touch only due rows: query counts over data sizes, bounded passes,
the re-check under the lock, and the batched queue rows."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents import tasks
from agents.models import Effect
from agents.runtime import recovery
from approvals.contract import RUN_ADVANCE_TASK
from approvals.models import AgentRun, ApprovalRequest, Notification
from approvals.services import approvals_sweep
from approvals.services import sweep as sweep_module
from audit.models import AuditEvent
from audit.verify import chain_verify_db
from tests.support.approvals import request_approval
from tests.support.factories import EffectFactory, RunFactory
from tests.support.queue import tasks_named


def _runs(alice, count: int, **fields) -> list[AgentRun]:
    return AgentRun.objects.bulk_create(
        [
            AgentRun(
                id=(pk := uuid.uuid4()),
                thread_id=str(pk),
                agent="refund_agent",
                graph_version="1",
                requested_by=alice,
                **fields,
            )
            for _ in range(count)
        ],
        batch_size=1000,
    )


def _age(runs: list[AgentRun], *, seconds: float) -> None:
    then = timezone.now() - dt.timedelta(seconds=seconds)
    AgentRun.objects.filter(pk__in=[run.pk for run in runs]).update(updated_at=then)


def _not_due(alice, settings, count: int) -> None:
    """``count`` rows of every kind the sweep and recovery must not read one by one."""
    now = timezone.now()
    later = now + dt.timedelta(days=1)
    waiting = _runs(alice, count, status=AgentRun.Status.WAITING)
    _age(waiting, seconds=settings.Q_RETRY * 10)
    completed = _runs(alice, count, status=AgentRun.Status.COMPLETED)
    _age(completed, seconds=settings.Q_RETRY * 10)
    live = _runs(alice, count, status=AgentRun.Status.RUNNING, lease_expires_at=later)
    _age(live, seconds=settings.Q_RETRY * 10)
    flagged = _runs(alice, count, status=AgentRun.Status.RUNNING, flag="x", lease_expires_at=now)
    _age(flagged, seconds=settings.Q_RETRY * 10)
    ApprovalRequest.objects.bulk_create(
        [
            ApprovalRequest(
                run=waiting[n % len(waiting)],
                interrupt_id=f"later-{uuid.uuid4()}",
                tool="refund_order",
                payload_hash="0" * 64,
                tier="write",
                expires_at=later,
                remind_at=later - dt.timedelta(hours=1),
                escalate_at=later - dt.timedelta(hours=2),
            )
            for n in range(count)
        ],
        batch_size=1000,
    )
    Effect.objects.bulk_create(
        [
            Effect(
                key=f"{run.thread_id}:done",
                run=run,
                tool="refund_payment",
                args_fingerprint="0" * 64,
                status=Effect.Status.SUCCEEDED,
            )
            for run in completed
        ],
        batch_size=1000,
    )


def _due(alice, settings) -> dict[str, object]:
    """Four runs recovery must queue, one approval due per step, one effect in doubt."""
    now = timezone.now()
    lapsed = _runs(
        alice, 2, status=AgentRun.Status.RUNNING, lease_expires_at=now - dt.timedelta(minutes=1)
    )
    orphaned = _runs(alice, 1, status=AgentRun.Status.QUEUED)
    unwoken = _runs(alice, 1, status=AgentRun.Status.WAITING, wake_requested=True)
    _age(orphaned + unwoken, seconds=settings.Q_RETRY + 5)
    past = now - dt.timedelta(seconds=1)
    approvals = [request_approval(requester=alice, tier="write") for _ in range(3)]
    remind, escalate, expire = approvals
    ApprovalRequest.objects.filter(pk=remind.pk).update(remind_at=past, escalate_at=None)
    ApprovalRequest.objects.filter(pk=escalate.pk).update(escalate_at=past, remind_at=None)
    ApprovalRequest.objects.filter(pk=expire.pk).update(expires_at=past)
    effect = EffectFactory(
        run=RunFactory(requested_by=alice), tool="no_such_tool", status=Effect.Status.IN_DOUBT
    )
    return {"runs": lapsed + orphaned + unwoken, "approvals": approvals, "effect": effect}


def _done(due: dict[str, object]) -> None:
    """What the workers would have done with the due rows of a pass."""
    AgentRun.objects.filter(pk__in=[run.pk for run in due["runs"]]).update(
        status=AgentRun.Status.COMPLETED, lease_expires_at=None, wake_requested=False
    )
    Effect.objects.filter(pk=due["effect"].pk).update(status=Effect.Status.FAILED)


def _one_pass() -> tuple[dict[str, int], int]:
    counts = approvals_sweep()
    return counts, tasks.runs_recover()


def test_a_pass_costs_the_same_queries_with_20_or_2000_rows_not_due(
    demo_policy, alice, settings, django_assert_num_queries
):
    _not_due(alice, settings, 5)
    due = _due(alice, settings)
    with CaptureQueriesContext(connection) as small:
        counts, recovered = _one_pass()
    assert counts == {"expired": 1, "escalated": 1, "reminded": 1, "retried": 0}
    assert recovered == 4
    assert Effect.objects.get(pk=due["effect"].pk).escalated_at is not None
    _done(due)

    _not_due(alice, settings, 500)
    assert AgentRun.objects.count() > 2000
    due = _due(alice, settings)
    with django_assert_num_queries(len(small)):
        counts, recovered = _one_pass()
    assert counts == {"expired": 1, "escalated": 1, "reminded": 1, "retried": 0}
    assert recovered == 4


def test_recovery_costs_the_same_queries_for_one_or_forty_due_runs(
    alice, settings, queued, django_assert_num_queries, django_capture_on_commit_callbacks
):
    now = timezone.now()
    lapsed = _runs(alice, 1, status=AgentRun.Status.QUEUED, lease_expires_at=now)
    with CaptureQueriesContext(connection) as one:
        assert recovery.runs_recover() == 1
    AgentRun.objects.filter(pk=lapsed[0].pk).update(status=AgentRun.Status.COMPLETED)
    many = _runs(alice, 40, status=AgentRun.Status.RUNNING, lease_expires_at=now)
    with (
        django_capture_on_commit_callbacks(execute=True),
        django_assert_num_queries(len(one)),
    ):
        assert recovery.runs_recover() == 40
    assert {args[1] for args in tasks_named(queued, RUN_ADVANCE_TASK)} >= {
        str(run.pk) for run in many
    }


@pytest.mark.parametrize("field", ["remind_at", "escalate_at", "expires_at"])
def test_a_pass_costs_the_same_queries_for_one_or_a_chunk_of_due_approvals(
    demo_policy, alice, field
):
    """Set-based: one claim, one UPDATE, one batch of audit events, one INSERT of
    notifications per chunk, whatever the number of due rows in it."""

    def pass_with(k: int) -> int:
        past = timezone.now() - dt.timedelta(seconds=1)
        for _ in range(k):
            approval = request_approval(requester=alice, tier="write")
            ApprovalRequest.objects.filter(pk=approval.pk).update(
                **{"remind_at": None, "escalate_at": None, field: past}
            )
        written = Notification.objects.count()
        events = AuditEvent.objects.count()
        with CaptureQueriesContext(connection) as captured:
            counts = approvals_sweep()
        assert sum(counts.values()) == k
        assert AuditEvent.objects.count() - events == k
        assert Notification.objects.count() - written >= k  # at least one recipient each
        return len(captured)

    one = pass_with(1)
    assert pass_with(7) == one
    # A whole chunk; SQLite's driver limit (999 variables) splits an INSERT at about 60 rows,
    # and a chunk writes two notifications per approval, so there half a chunk.
    assert pass_with(sweep_module.CHUNK if connection.vendor == "postgresql" else 25) == one


def test_the_sweeps_batched_events_verify_and_chain_like_single_ones(demo_policy, alice):
    past = timezone.now() - dt.timedelta(seconds=1)
    for field in ("remind_at", "escalate_at", "expires_at"):
        for _ in range(3):
            approval = request_approval(requester=alice, tier="write")
            ApprovalRequest.objects.filter(pk=approval.pk).update(
                **{"remind_at": None, "escalate_at": None, field: past}
            )
    assert approvals_sweep() == {"expired": 3, "escalated": 3, "reminded": 3, "retried": 0}
    expired = ApprovalRequest.objects.filter(status=ApprovalRequest.Status.EXPIRED)
    assert len(expired) == 3
    for approval in expired:  # each row got its own decision value, written set-based
        assert (approval.decision["approval_id"], approval.decision["by"]) == (
            approval.id,
            "system:timeout",
        )
        assert approval.decided_by_label == "system:timeout" and approval.remind_at is None
    request_approval(requester=alice, tier="write")  # one single event after the batches
    seqs = list(AuditEvent.objects.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert chain_verify_db().ok


def test_recovery_takes_at_most_recovery_batch_runs_and_the_rest_next_pass(
    alice, settings, queued, django_capture_on_commit_callbacks
):
    settings.RECOVERY_BATCH = 3
    runs = _runs(
        alice,
        5,
        status=AgentRun.Status.RUNNING,
        lease_expires_at=timezone.now() - dt.timedelta(minutes=1),
    )
    _age(runs, seconds=settings.Q_RETRY * 2)
    with django_capture_on_commit_callbacks(execute=True):
        assert recovery.runs_recover() == 3
    first = {args[1] for args in tasks_named(queued, RUN_ADVANCE_TASK)}
    queued.reset_mock()
    with django_capture_on_commit_callbacks(execute=True):
        assert recovery.runs_recover() == 3
    second = {args[1] for args in tasks_named(queued, RUN_ADVANCE_TASK)}
    assert len(first) == 3
    assert first | second == {str(run.pk) for run in runs}  # nobody waits two passes


def test_recovery_never_queues_a_flagged_run(
    alice, settings, queued, django_capture_on_commit_callbacks
):
    (flagged,) = _runs(
        alice, 1, status=AgentRun.Status.RUNNING, flag="a person must look", lease_expires_at=None
    )
    _age([flagged], seconds=settings.Q_RETRY + 5)
    with django_capture_on_commit_callbacks(execute=True):
        assert recovery.runs_recover() == 0
    assert tasks_named(queued, RUN_ADVANCE_TASK) == []


def test_an_approval_decided_after_the_sweep_listed_it_is_left_alone(
    demo_policy, alice, monkeypatch
):
    """The chunk's lock re-checks pending and due: a decision (or another sweep) that
    claimed the row between the listing and the lock wins, and this pass does nothing."""
    approval = request_approval(requester=alice, tier="write")
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        expires_at=timezone.now() - dt.timedelta(seconds=1)
    )
    listed = sweep_module._due

    def listed_then_decided(field: str, now: dt.datetime) -> list[int]:
        ids = listed(field, now)
        if field == "expires_at":
            assert ids == [approval.pk]
            ApprovalRequest.objects.filter(pk=approval.pk, status="pending").update(
                status=ApprovalRequest.Status.APPROVED
            )
        return ids

    monkeypatch.setattr(sweep_module, "_due", listed_then_decided)
    assert approvals_sweep()["expired"] == 0
    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.APPROVED
    assert not AuditEvent.objects.filter(action="approval.expired").exists()
