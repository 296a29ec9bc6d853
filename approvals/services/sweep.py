"""The sweep: reminders, escalations and expiries that are due, plus notification retries.

Runs every minute (django-q2 Schedule, migration 0005) and once with ``manage.py sweep``. Each
step selects only due rows through an index on (status, due time) with a bound (``SWEEP_BATCH``
per step and pass; the next pass continues), so its query count depends on how many are due,
never on how many approvals are pending. The due rows are handled in chunks of ``CHUNK``, one
transaction each: one ``SELECT ... FOR UPDATE`` claims the chunk's rows that are still pending
and due (the decide path takes the same row lock, so each outcome is claimed once), and each
row's change writes its audit event in that transaction. The runs that expiries wake are
queued together once their transactions committed (their wake flag is set in the expiry's own
transaction, so recovery re-queues them if this process dies first).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from approvals import contract, notifications, policy
from approvals.contract import TIMEOUT_ACTOR
from approvals.models import AgentRun, ApprovalRequest, Notification, RiskTier
from approvals.notifications import notifications_create
from approvals.services.decisions import approval_close
from approvals.services.runs import run_advance_enqueue
from approvals.services.wake import tasks_enqueue_many
from audit.services import event_record

# Rows claimed per transaction: short enough that a reviewer deciding one of them waits little.
CHUNK = 50
SWEEP_ACTOR = "system:sweep"
# A step's action on a claimed row: True if it acted.
Act = Callable[[ApprovalRequest], bool]


class _Tiers:
    """The tiers read once per pass (``policy.tier_get`` is a query)."""

    def __init__(self) -> None:
        self._seen: dict[str, RiskTier | None] = {}

    def get(self, name: str) -> RiskTier | None:
        if name not in self._seen:
            self._seen[name] = policy.tier_get(name)
        return self._seen[name]


def approvals_sweep(*, now: dt.datetime | None = None) -> dict[str, int]:
    """One pass: expire, escalate, remind (in that order), then retry due notifications."""
    now = now or timezone.now()
    tiers = _Tiers()
    woken: list[Any] = []
    expired = _step(
        "expires_at",
        now,
        lambda a: _expire(a, now=now, tier=tiers.get(a.tier), woken=woken),
        # run_advance_enqueue's wake flag, in the expiries' transaction, for the chunk at once.
        chunk_done=lambda rows: AgentRun.objects.filter(pk__in={row.run_id for row in rows}).update(
            wake_requested=True
        ),
    )
    tasks_enqueue_many(
        contract.RUN_ADVANCE_TASK, [(str(pk),) for pk in dict.fromkeys(woken)], group="runs"
    )
    escalated = _step(
        "escalate_at",
        now,
        lambda a: _escalate(a, now=now, tier=tiers.get(a.tier), save=False),
        chunk_done=lambda rows: ApprovalRequest.objects.filter(
            pk__in=[row.pk for row in rows]
        ).update(escalate_at=None, escalated_at=now),
    )
    reminded = _step(
        "remind_at",
        now,
        lambda a: _remind(a, now=now, tier=tiers.get(a.tier), save=False),
        chunk_done=lambda rows: ApprovalRequest.objects.filter(
            pk__in=[row.pk for row in rows]
        ).update(remind_at=None, reminded_at=now),
    )
    due = notifications.notifications_due(now=now, limit=_batch())
    tasks_enqueue_many(notifications.DELIVER_TASK, [(pk,) for pk in due], group="notifications")
    return {"expired": expired, "escalated": escalated, "reminded": reminded, "retried": len(due)}


def _batch() -> int:
    return settings.SWEEP_BATCH


def _due(field: str, now: dt.datetime) -> list[int]:
    return list(
        ApprovalRequest.objects.filter(
            status=ApprovalRequest.Status.PENDING, **{f"{field}__lte": now}
        )
        .order_by(field, "id")
        .values_list("id", flat=True)[: _batch()]
    )


def _step(
    field: str,
    now: dt.datetime,
    act: Act,
    *,
    chunk_done: Callable[[list[ApprovalRequest]], Any],
) -> int:
    """Claim and act on the due rows of ``field``, ``CHUNK`` per transaction; ``chunk_done``
    writes what every acted-on row of the chunk shares, in the same transaction."""
    ids = _due(field, now)
    done = 0
    for start in range(0, len(ids), CHUNK):
        with transaction.atomic():
            locked = _lock_due(
                ids=ids[start : start + CHUNK], field=field, now=now, skip_locked=True
            )
            acted = [row for row in locked if act(row)]
            if acted:
                chunk_done(acted)
            done += len(acted)
    return done


def _lock_due(
    *, ids: list[int], field: str, now: dt.datetime, skip_locked: bool = False
) -> list[ApprovalRequest]:
    """Lock those of ``ids`` still pending with ``field`` due (re-checked under the lock: a
    decision or another sweep that got there first leaves its row out).

    ``skip_locked`` (a chunk of several rows): a row whose approval or run another transaction
    holds is left for the next pass instead of waited for. A chunk holds the runs of the rows
    it has locked while it locks the next ones; waiting there for an approval that a decision
    holds, while that decision waits for the run, is a deadlock (two approvals of one run).

    The runs are locked with them, before any audit event takes the chain's lock, as the
    decide path and the worker do (row locks first, then the chain): a chunk that took the
    chain's lock never waits for a run. The requesting users are not locked: many runs share
    one, and a chunk holding it could deadlock with a decision holding a run.
    """
    return list(
        ApprovalRequest.objects.select_for_update(of=("self", "run"), skip_locked=skip_locked)
        .select_related("run", "run__requested_by")
        .filter(pk__in=ids, status=ApprovalRequest.Status.PENDING, **{f"{field}__lte": now})
        .order_by(field, "id")
    )


def _lock_if_due(*, approval_id: int, field: str, now: dt.datetime) -> ApprovalRequest | None:
    """Lock the approval if it is still pending and ``field`` is due; the decide path takes
    the same row lock, so each outcome is claimed once."""
    found = _lock_due(ids=[approval_id], field=field, now=now)
    return found[0] if found else None


def approval_expire(*, approval_id: int, now: dt.datetime | None = None) -> bool:
    """Apply the tier's default decision as system:timeout; False if it was decided first.

    The claim is the same row lock the decision takes, so a decision racing this ends in
    exactly one outcome.
    """
    now = now or timezone.now()
    with transaction.atomic():
        locked = _lock_if_due(approval_id=approval_id, field="expires_at", now=now)
        if locked is None:
            return False
        return _expire(locked, now=now, tier=policy.tier_get(locked.tier), woken=None)


def _expire(
    locked: ApprovalRequest, *, now: dt.datetime, tier: RiskTier | None, woken: list[Any] | None
) -> bool:
    """Expire a locked, due approval (in the caller's transaction). The run's advance is queued
    on commit, or, with ``woken``, its wake flag set here and its id added for the caller to
    queue in a batch."""
    default = tier.expiry_decision if tier else RiskTier.ExpiryDecision.REJECT
    value = contract.decision_value(
        decision=default,
        args=locked.args,
        message="expired",
        by=TIMEOUT_ACTOR,
        approval_id=locked.id,
        tier=locked.tier,
        policy_version=locked.policy_version,
        decided_at=now,
    )
    # A default of approve must pass the ledger's check, so it is stored as approved.
    approval_close(
        approval=locked,
        status=(
            ApprovalRequest.Status.APPROVED
            if default == RiskTier.ExpiryDecision.APPROVE
            else ApprovalRequest.Status.EXPIRED
        ),
        decided_by=None,
        label=TIMEOUT_ACTOR,
        value=value,
        now=now,
    )
    event_record(
        action="approval.expired",
        actor=TIMEOUT_ACTOR,
        run_id=locked.run_id,
        approval_id=locked.id,
        tool=locked.tool,
        data={
            "default_decision": default,
            "expires_at": locked.expires_at.isoformat(),
            "policy_version": locked.policy_version,
        },
    )
    notifications_create(
        approval=locked,
        event=Notification.Event.EXPIRY,
        tier=tier,
        detail=f"Nobody decided in time; {TIMEOUT_ACTOR} applied {default}.",
    )
    if woken is None:
        run_advance_enqueue(run_id=locked.run_id)
    else:  # the sweep sets the wake flags of its chunk and queues the tasks together
        woken.append(locked.run_id)
    return True


def approval_remind(*, approval_id: int, now: dt.datetime | None = None) -> bool:
    """Remind the approvers once, if the approval is still pending and the reminder is due."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = _lock_if_due(approval_id=approval_id, field="remind_at", now=now)
        if locked is None:
            return False
        return _remind(locked, now=now, tier=policy.tier_get(locked.tier), save=True)


def _remind(
    locked: ApprovalRequest, *, now: dt.datetime, tier: RiskTier | None, save: bool
) -> bool:
    """Remind for a locked, due approval; ``save=False``: the caller writes the due times."""
    locked.remind_at = None
    locked.reminded_at = now
    if save:
        locked.save(update_fields=["remind_at", "reminded_at"])
    event_record(
        action="approval.reminded",
        actor=SWEEP_ACTOR,
        run_id=locked.run_id,
        approval_id=locked.id,
        tool=locked.tool,
        data={"expires_at": locked.expires_at.isoformat()},
    )
    notifications_create(
        approval=locked,
        event=Notification.Event.REMINDER,
        tier=tier,
        detail=f"It expires at {locked.expires_at:%Y-%m-%d %H:%M} UTC.",
    )
    return True


def approval_escalate(*, approval_id: int, now: dt.datetime | None = None) -> bool:
    """Widen who may decide to the tier's escalation group and notify that group, once."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = _lock_if_due(approval_id=approval_id, field="escalate_at", now=now)
        if locked is None:
            return False
        return _escalate(locked, now=now, tier=policy.tier_get(locked.tier), save=True)


def _escalate(
    locked: ApprovalRequest, *, now: dt.datetime, tier: RiskTier | None, save: bool
) -> bool:
    """Escalate a locked, due approval; ``save=False``: the caller writes the due times."""
    locked.escalate_at = None
    locked.escalated_at = now
    if save:
        locked.save(update_fields=["escalate_at", "escalated_at"])
    group = tier.escalation_group.name if tier and tier.escalation_group_id else ""
    event_record(
        action="approval.escalated",
        actor=SWEEP_ACTOR,
        run_id=locked.run_id,
        approval_id=locked.id,
        tool=locked.tool,
        data={"escalation_group": group, "expires_at": locked.expires_at.isoformat()},
    )
    notifications_create(
        approval=locked,
        event=Notification.Event.ESCALATION,
        tier=tier,
        detail=f"Nobody decided yet; members of {group or 'the escalation group'} may now.",
    )
    return True
