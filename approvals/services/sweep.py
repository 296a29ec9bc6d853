"""The sweep: reminders, escalations and expiries that are due, plus notification retries.

Runs every minute (django-q2 Schedule, migration 0005) and once with ``manage.py sweep``. Each
step selects only due rows through an index on (status, due time) with a bound (``SWEEP_BATCH``
per step and pass; the next pass continues), so its query count depends on how many are due,
never on how many approvals are pending. The due rows are handled in chunks of ``CHUNK``, one
transaction each: one ``SELECT ... FOR UPDATE`` claims the chunk's rows that are still pending
and due (the decide path takes the same row lock, so each outcome is claimed once), and each
chunk's changes are written set-based in that transaction: one UPDATE of the rows, one batch
append of their audit events (``audit.batch.events_record``: one chain lock, one INSERT), one
INSERT of their notifications (recipients read once per tier and event in a pass) and one
delivery task, the rollups' two statements for expiries. So a pass costs the same number of
queries for one due row or ``CHUNK`` of them. The runs that expiries wake are queued together
once their transactions committed (their wake flag is set in the expiry's own transaction, so
recovery re-queues them if this process dies first).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from approvals import contract, notifications, policy
from approvals.contract import TIMEOUT_ACTOR
from approvals.deadlines import expiry_decision_applied
from approvals.models import AgentRun, ApprovalRequest, Notification, RiskTier
from approvals.notifications_batch import Recipients, notifications_create_many
from approvals.rollups import approvals_rollup_add
from approvals.services.canaries import canaries_close_expired
from approvals.services.runs import run_advance_enqueue
from approvals.services.wake import tasks_enqueue_many
from approvals.tracing import approvals_wait_record
from audit.batch import events_record
from core.sealed_fields import field_seal
from core.sealing import datakey_scope

# Rows claimed per transaction (SWEEP_BATCH's default: one transaction per step). A chunk holds
# its rows and their runs to its commit (a decision on one of them waits that long) and the
# chain's lock from its events, written last, to its commit (every audit writer waits for that).
# 200 rather than 50: the pass takes about 40% less, the chain is held in 3 windows of ~36 ms a
# pass instead of 12 of ~16 ms, a due row's decision waits up to one chunk (~130 ms at load 3,
# ~50 ms with 50): docs/benchmarks.md, "Sweep and recovery".
CHUNK = 200
SWEEP_ACTOR = "system:sweep"
# The columns the steps read (the notifications' text and recipients, the events, the expiry's
# decision and rollups): not the payload, the runs' state or the users' other columns, which
# cost most of the claim's time to read and turn into objects. Only an expiry notifies the
# requester, so only the expiry step reads the requesting user (its address).
_FIELDS = (
    *("id", "run_id", "tool", "tier", "status", "args", "policy_version", "created_at"),
    "payload_hash",  # the notifications name the version of the action they describe
    *("expires_at", "remind_at", "escalate_at", "reminded_at", "escalated_at"),
    *("decided_at", "decided_by_id", "decided_by_label"),
    *("run__id", "run__agent", "run__requested_by_id"),
)
_REQUESTER = ("run__requested_by__id", "run__requested_by__email")
# A step's action on a chunk's claimed rows (in its transaction): how many it acted on.
Act = Callable[[list[ApprovalRequest]], int]


class _Pass:
    """What a pass reads once: the tiers (``policy.tier_get`` is a query) and the recipients."""

    def __init__(self) -> None:
        self._tiers: dict[str, RiskTier | None] = {}
        self.recipients = Recipients()

    def tier(self, name: str) -> RiskTier | None:
        if name not in self._tiers:
            self._tiers[name] = policy.tier_get(name)
        return self._tiers[name]


def approvals_sweep(*, now: dt.datetime | None = None) -> dict[str, int]:
    """One pass: expire, escalate, remind (in that order), then retry due notifications.

    The pass shares one data-key cache: the expiries open the args and seal the decisions of
    each chunk after one key query."""
    with datakey_scope():
        return _sweep(now=now)


def _sweep(*, now: dt.datetime | None) -> dict[str, int]:
    now = now or timezone.now()
    seen = _Pass()
    woken: list[Any] = []
    expired = _step("expires_at", now, lambda rows: _expire(rows, now=now, seen=seen, woken=woken))
    tasks_enqueue_many(
        contract.RUN_ADVANCE_TASK, [(str(pk),) for pk in dict.fromkeys(woken)], group="runs"
    )
    escalated = _step("escalate_at", now, lambda rows: _escalate(rows, now=now, seen=seen))
    reminded = _step("remind_at", now, lambda rows: _remind(rows, now=now, seen=seen))
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


def _step(field: str, now: dt.datetime, act: Act) -> int:
    """Claim and act on the due rows of ``field``, ``CHUNK`` per transaction."""
    ids = _due(field, now)
    done = 0
    for start in range(0, len(ids), CHUNK):
        with transaction.atomic():
            locked = _lock_due(
                ids=ids[start : start + CHUNK], field=field, now=now, skip_locked=True
            )
            if locked:
                done += act(locked)
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

    The runs are locked with them, before the audit events take the chain's lock, as the
    decide path and the worker do (row locks first, then the chain): a chunk that took the
    chain's lock never waits for a run. The requesting users are not locked: many runs share
    one, and a chunk holding it could deadlock with a decision holding a run.
    """
    expiry = field == "expires_at"
    related = ("run", "run__requested_by") if expiry else ("run",)
    fields = (*_FIELDS, *_REQUESTER) if expiry else _FIELDS
    return list(
        ApprovalRequest.objects.select_for_update(of=("self", "run"), skip_locked=skip_locked)
        .select_related(*related)
        .only(*fields)
        .filter(pk__in=ids, status=ApprovalRequest.Status.PENDING, **{f"{field}__lte": now})
        .order_by(field, "id")
    )


def _lock_if_due(*, approval_id: int, field: str, now: dt.datetime) -> list[ApprovalRequest]:
    """Lock the approval if it is still pending and ``field`` is due (a list of it, or empty);
    the decide path takes the same row lock, so each outcome is claimed once."""
    return _lock_due(ids=[approval_id], field=field, now=now)


def _one(field: str, act: Act, *, approval_id: int, now: dt.datetime | None) -> bool:
    now = now or timezone.now()
    with datakey_scope(), transaction.atomic():
        locked = _lock_if_due(approval_id=approval_id, field=field, now=now)
        return bool(locked) and act(locked) > 0


def approval_expire(*, approval_id: int, now: dt.datetime | None = None) -> bool:
    """Apply the tier's default decision as system:timeout; False if it was decided first.

    The claim is the same row lock the decision takes, so a decision racing this ends in
    exactly one outcome.
    """
    now = now or timezone.now()
    return _one(
        "expires_at",
        lambda rows: _expire(rows, now=now, seen=_Pass(), woken=None),
        approval_id=approval_id,
        now=now,
    )


def approval_remind(*, approval_id: int, now: dt.datetime | None = None) -> bool:
    """Remind the approvers once, if the approval is still pending and the reminder is due."""
    now = now or timezone.now()
    act = lambda rows: _remind(rows, now=now, seen=_Pass())  # noqa: E731
    return _one("remind_at", act, approval_id=approval_id, now=now)


def approval_escalate(*, approval_id: int, now: dt.datetime | None = None) -> bool:
    """Widen who may decide to the tier's escalation group and notify that group, once."""
    now = now or timezone.now()
    act = lambda rows: _escalate(rows, now=now, seen=_Pass())  # noqa: E731
    return _one("escalate_at", act, approval_id=approval_id, now=now)


def _close_many(rows: list[ApprovalRequest], *, now: dt.datetime) -> None:
    """Write the expiries' close (the fields ``approval_close`` writes) in few statements. On
    Postgres one UPDATE: each row's status and decision come from one JSON text
    (``json_to_recordset``; a ``jsonb[]`` parameter costs psycopg a regex per element), the
    shared fields are constants, and each row gets one new version instead of two. Elsewhere
    the shared fields with one UPDATE per outcome, each row's own decision with one more.
    (``bulk_update`` builds a CASE per field and row: most of a chunk's time in Python.)"""
    shared = {
        "decided_by": None,
        "decided_by_label": TIMEOUT_ACTOR,
        "decided_at": now,
        "remind_at": None,
        "escalate_at": None,
    }
    # Sealed here: neither statement has an instance to seal through (the rows keep plaintext).
    decisions = [field_seal(ApprovalRequest, "decision", row.run_id, row.decision) for row in rows]
    if connection.vendor != "postgresql":
        by_status: dict[str, list[int]] = {}
        for row in rows:
            by_status.setdefault(row.status, []).append(row.pk)
        for status, pks in by_status.items():
            ApprovalRequest.objects.filter(pk__in=pks).update(status=status, **shared)
        closed = [
            ApprovalRequest(pk=row.pk, decision=sealed)
            for row, sealed in zip(rows, decisions, strict=True)
        ]
        ApprovalRequest.objects.bulk_update(closed, ["decision"])
        return
    table = ApprovalRequest._meta.db_table
    values = [
        {"id": row.pk, "s": row.status, "d": sealed}
        for row, sealed in zip(rows, decisions, strict=True)
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            f'UPDATE "{table}" AS a SET "status" = v.s, "decision" = v.d, '  # noqa: S608
            '"decided_by_id" = NULL, "decided_by_label" = %s, "decided_at" = %s, '
            '"remind_at" = NULL, "escalate_at" = NULL '
            "FROM json_to_recordset(%s::json) AS v(id bigint, s varchar, d jsonb) "
            "WHERE a.id = v.id",
            [TIMEOUT_ACTOR, now, json.dumps(values)],
        )


def _expire(
    rows: list[ApprovalRequest], *, now: dt.datetime, seen: _Pass, woken: list[Any] | None
) -> int:
    """Expire locked, due approvals (in the caller's transaction): the tier's default decision
    by system:timeout, stored as ``approval_close`` stores it, audited, notified, counted in the
    rollups. With ``woken``, the runs' wake flags are set here (one UPDATE) and their ids added
    for the caller to queue in a batch; without, each run's advance is queued on commit."""
    events: list[dict[str, Any]] = []
    notes: list[tuple[ApprovalRequest, str, RiskTier | None, str]] = []
    for locked in rows:
        tier = seen.tier(locked.tier)
        default = str(tier.expiry_decision if tier else RiskTier.ExpiryDecision.REJECT)
        applied = expiry_decision_applied(approval=locked, default=default)
        # A default of approve must pass the ledger's check, so it is stored as approved (or
        # edited, for a round an edit vote opened); a reject as expired.
        locked.status = (
            ApprovalRequest.Status.EXPIRED
            if applied == ApprovalRequest.Decision.REJECT
            else ApprovalRequest.DECISION_STATUS[applied]
        )
        locked.decided_by = None
        locked.decided_by_label = TIMEOUT_ACTOR
        locked.decided_at = now
        locked.decision = contract.decision_value(
            decision=applied,
            args=locked.args,
            message="expired",
            by=TIMEOUT_ACTOR,
            approval_id=locked.id,
            tier=locked.tier,
            policy_version=locked.policy_version,
            decided_at=now,
        )
        locked.remind_at = None
        locked.escalate_at = None
        events.append(
            _event(
                locked,
                action="approval.expired",
                actor=TIMEOUT_ACTOR,
                data={
                    "default_decision": default,
                    **({"applied": applied} if applied != default else {}),
                    "expires_at": locked.expires_at.isoformat(),
                    "policy_version": locked.policy_version,
                },
            )
        )
        detail = f"Nobody decided in time; {TIMEOUT_ACTOR} applied {applied}."
        notes.append((locked, Notification.Event.EXPIRY, tier, detail))
    _close_many(rows, now=now)
    approvals_wait_record(approvals=rows, role=TIMEOUT_ACTOR)
    canaries = canaries_close_expired(approvals=rows, now=now)  # counted as expired, apart
    counted = [row for row in rows if row.pk not in canaries] if canaries else rows
    approvals_rollup_add(approvals=counted)  # the metrics count them in the same transaction
    notifications_create_many(notes, recipients=seen.recipients)
    run_ids = list(dict.fromkeys(row.run_id for row in rows))
    if woken is None:
        for run_id in run_ids:
            run_advance_enqueue(run_id=run_id)
    else:  # run_advance_enqueue's wake flag, for the chunk at once; the caller queues the tasks
        AgentRun.objects.filter(pk__in=run_ids).update(wake_requested=True)
        woken.extend(run_ids)
    events_record(events)  # last: the chain's lock is held from here to the commit
    return len(rows)


def _remind(rows: list[ApprovalRequest], *, now: dt.datetime, seen: _Pass) -> int:
    """Remind for locked, due approvals (in the caller's transaction), once each."""
    events, notes = [], []
    for locked in rows:
        locked.remind_at = None
        locked.reminded_at = now
        events.append(
            _event(
                locked,
                action="approval.reminded",
                actor=SWEEP_ACTOR,
                data={"expires_at": locked.expires_at.isoformat()},
            )
        )
        detail = f"It expires at {locked.expires_at:%Y-%m-%d %H:%M} UTC."
        notes.append((locked, Notification.Event.REMINDER, seen.tier(locked.tier), detail))
    ApprovalRequest.objects.filter(pk__in=[row.pk for row in rows]).update(
        remind_at=None, reminded_at=now
    )
    notifications_create_many(notes, recipients=seen.recipients)
    events_record(events)  # last: the chain's lock is held from here to the commit
    return len(rows)


def _escalate(rows: list[ApprovalRequest], *, now: dt.datetime, seen: _Pass) -> int:
    """Escalate locked, due approvals (in the caller's transaction): the tier's escalation
    group may decide from now on, and is told, once."""
    events, notes = [], []
    for locked in rows:
        tier = seen.tier(locked.tier)
        locked.escalate_at = None
        locked.escalated_at = now
        group = tier.escalation_group.name if tier and tier.escalation_group_id else ""
        events.append(
            _event(
                locked,
                action="approval.escalated",
                actor=SWEEP_ACTOR,
                data={"escalation_group": group, "expires_at": locked.expires_at.isoformat()},
            )
        )
        detail = f"Nobody decided yet; members of {group or 'the escalation group'} may now."
        notes.append((locked, Notification.Event.ESCALATION, tier, detail))
    ApprovalRequest.objects.filter(pk__in=[row.pk for row in rows]).update(
        escalate_at=None, escalated_at=now
    )
    notifications_create_many(notes, recipients=seen.recipients)
    events_record(events)  # last: the chain's lock is held from here to the commit
    return len(rows)


def _event(locked: ApprovalRequest, *, action: str, actor: str, data: dict[str, Any]) -> dict:
    return {
        "action": action,
        "actor": actor,
        "run_id": locked.run_id,
        "approval_id": locked.id,
        "tool": locked.tool,
        "data": data,
    }
