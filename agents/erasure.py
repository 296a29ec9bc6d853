"""Erasure of runs' personal data (``manage.py erase``, the admin's "Erase personal data").

``runs_erase(*, runs, user, reason)`` takes the runs and their forks (a fork copies its
parent's input and state), refuses what cannot be erased yet (``ErasureRefused``: not ended, a
worker holds it, an advance is queued, an effect is claimed or in doubt: reconciling asks the
downstream by key, and would read a deleted sandbox row as "it never acted"), then:

A. one transaction per batch of runs: an ``Erasure`` row, the runs' data keys destroyed
   (their sealed values read "erased" from now on), ``AgentRun.erased_at``, their pending
   approvals closed, their subjects' digests, idempotency keys and sandbox rows deleted, and
   ``erasure.performed`` (who, why, which runs; never the subject or any run data);
B. after it commits, the runs' checkpoints deleted (another connection or file: it cannot
   join A), then ``Erasure.status = completed`` and ``erasure.completed``.

A crash between A and B leaves the erasure ``keys_destroyed``: ``erasures_resume`` (the
every-minute sweep, ``erase --resume``) deletes the checkpoints again and completes it. An
erased run is never advanced again (``runtime.lease.RunErased``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from agents.erasure_models import Erasure
from agents.legacy_seal import legacy_audit_events, runs_reseal
from agents.models import (
    Effect,
    RunStartKey,
    SandboxDeploy,
    SandboxInventoryMovement,
    SandboxNotification,
    SandboxPayment,
    SandboxTicket,
)
from agents.runtime.checkpoint import checkpointer_get
from agents.subjects import subjects_delete
from agents.tools import tool_find
from approvals.models import AgentRun, ApprovalRequest
from approvals.rollups import approvals_rollup_add
from audit.services import compliance_group_ensure, event_record
from core.errors import ApplicationError
from core.sealing import datakeys_destroy

log = logging.getLogger(__name__)

ACTOR = "system:erasure"
ERASER = "erasure"  # decided_by_label of the approvals an erasure closes
PERMISSION = "agents.erase_run"
BATCH = 100
SANDBOXES = (
    SandboxTicket,
    SandboxDeploy,
    SandboxPayment,
    SandboxInventoryMovement,
    SandboxNotification,
)
_UNSETTLED = (Effect.Status.CLAIMED, Effect.Status.IN_DOUBT)


class ErasureInvalid(ApplicationError):
    """A request that names nothing to erase or gives no reason (400)."""


class ErasureForbidden(ApplicationError):
    """The person named does not hold the right to erase (403)."""

    status_code = 403


class ErasureRefused(ApplicationError):
    """Some runs cannot be erased now (409); ``refusals`` says why, per run id."""

    status_code = 409

    def __init__(self, refusals: dict[str, str]):
        lines = "; ".join(f"run {run_id}: {why}" for run_id, why in refusals.items())
        super().__init__(f"Nothing was erased. {lines}", errors=dict(refusals))
        self.refusals = refusals


@dataclass
class ErasureOutcome:
    """What an erasure did: its records, the runs erased now, those erased before."""

    erasures: list[Erasure] = field(default_factory=list)
    erased: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _uuid(value: Any) -> uuid.UUID:
    if isinstance(value, AgentRun):
        return value.pk
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except ValueError:
        raise ErasureInvalid(f"{value!r} is not a run id", errors={"run": str(value)}) from None


def runs_resolve(runs: Iterable[Any]) -> list[AgentRun]:
    """The runs (objects or ids) and their forks, recursively, oldest first. ``ErasureInvalid``
    names an id that is no run."""
    asked = {_uuid(run) for run in runs}
    found = set(AgentRun.objects.filter(pk__in=asked).values_list("id", flat=True))
    missing = sorted(str(run_id) for run_id in asked - found)
    if missing:
        raise ErasureInvalid(
            f"No such run: {', '.join(missing)}", errors={"run": ", ".join(missing)}
        )
    ids, frontier = set(found), set(found)
    while frontier:
        forks = set(
            AgentRun.objects.filter(parent_run_id__in=frontier).values_list("id", flat=True)
        )
        frontier = forks - ids
        ids |= frontier
    return list(AgentRun.objects.filter(pk__in=ids).order_by("created_at", "id"))


def runs_refusals(runs: Sequence[AgentRun]) -> dict[str, str]:
    """Why each run that is not yet erased cannot be erased now (empty: all may be)."""
    now = timezone.now()
    refusals: dict[str, str] = {}
    live = [run for run in runs if run.erased_at is None]
    for run in live:
        if not run.is_terminal:
            refusals[str(run.pk)] = f"it is {run.status}: cancel it, and erase it once it has ended"
        elif run.lease_owner and run.lease_expires_at and run.lease_expires_at > now:
            refusals[str(run.pk)] = "a worker holds it (compensating a cancel?): try again soon"
        elif run.wake_requested:
            refusals[str(run.pk)] = "an advance is queued for it: try again once it has run"
    unsettled = Effect.objects.filter(
        run_id__in=[run.pk for run in live], status__in=_UNSETTLED
    ).values_list("run_id", "key", "status")
    for run_id, key, status in unsettled:
        refusals.setdefault(
            str(run_id),
            f"effect {key} is {status}: it must be settled first (reconciled, or by a person)",
        )
    # A cancelled run's applied effects are undone with their args (compensation reads them):
    # while one with a compensating tool is not undone yet, erasing would make it impossible.
    cancelled = [run.pk for run in live if run.status == AgentRun.Status.CANCELLED]
    owed = Effect.objects.filter(
        run_id__in=cancelled,
        status=Effect.Status.SUCCEEDED,
        compensates__isnull=True,
        compensation__isnull=True,
    ).values_list("run_id", "key", "tool")
    for run_id, key, tool in owed:
        spec = tool_find(tool)
        if spec is None or spec.compensate_with:
            refusals.setdefault(
                str(run_id),
                f"effect {key} of this cancelled run is not undone yet: compensate it first",
            )
    return refusals


def runs_erase(*, runs: Iterable[Any], user: Any, reason: str, kind: str = "run") -> ErasureOutcome:
    """Erase the personal data of the runs and their forks (see the module docstring)."""
    if not (user.is_active and user.has_perm(PERMISSION)):
        raise ErasureForbidden(f"{user.get_username()} may not erase personal data ({PERMISSION}).")
    reason = (reason or "").strip()
    if not reason:
        raise ErasureInvalid("Say why (a reason is required).", errors={"reason": "required"})
    resolved = runs_resolve(runs)
    refusals = runs_refusals(resolved)
    if refusals:
        raise ErasureRefused(refusals)
    outcome = ErasureOutcome(skipped=[str(r.pk) for r in resolved if r.erased_at is not None])
    todo = [run.pk for run in resolved if run.erased_at is None]
    for start in range(0, len(todo), BATCH):
        erasure = _keys_destroy(todo[start : start + BATCH], user=user, reason=reason, kind=kind)
        if erasure is not None:
            outcome.erasures.append(erasure)
            outcome.erased.extend(erasure.run_ids)
    for erasure in outcome.erasures:
        erasure_complete(erasure)
    return outcome


def _keys_destroy(run_ids: list[Any], *, user: Any, reason: str, kind: str) -> Erasure | None:
    """Transaction A: after it commits, the runs' data reads "erased"."""
    with transaction.atomic():
        locked = list(AgentRun.objects.select_for_update().filter(pk__in=run_ids).order_by("id"))
        refusals = runs_refusals(locked)  # again under the lock: things move
        # A fork made since the runs were resolved would keep their data: erase again.
        for fork in AgentRun.objects.filter(parent_run_id__in=run_ids, erased_at__isnull=True):
            if fork.pk not in set(run_ids):
                refusals.setdefault(
                    str(fork.parent_run_id),
                    f"run {fork.pk} was forked from it meanwhile: erase again",
                )
        if refusals:
            raise ErasureRefused(refusals)
        runs = [run for run in locked if run.erased_at is None]
        if not runs:
            return None
        ids = [run.pk for run in runs]
        now = timezone.now()
        erasure = Erasure.objects.create(
            user=user,
            username=user.get_username(),
            reason=reason,
            kind=kind,
            run_ids=[str(run_id) for run_id in ids],
        )
        # Values an older version wrote in plaintext are sealed first, so destroying the key
        # reaches them too; audit events of that time cannot be (append-only): counted.
        legacy_values = runs_reseal(ids)
        legacy_events = legacy_audit_events(ids)
        datakeys_destroy(ids)
        AgentRun.objects.filter(pk__in=ids).update(erased_at=now, updated_at=now)
        # A run that ended while waiting: nobody may decide for it now, nor the sweep expire it.
        pending = ApprovalRequest.objects.filter(
            run_id__in=ids, status=ApprovalRequest.Status.PENDING
        )
        closed = list(pending.values_list("id", flat=True))
        if closed:
            pending.update(
                status=ApprovalRequest.Status.EXPIRED, decided_at=now, decided_by_label=ERASER
            )
            approvals_rollup_add(  # the metrics count them as expired, in this transaction
                approvals=ApprovalRequest.objects.filter(pk__in=closed)
                .select_related("run")
                .only(
                    "id",
                    "run__agent",
                    "tool",
                    "tier",
                    "status",
                    "created_at",
                    "decided_at",
                    "decided_by",
                    "escalated_at",
                    "reminded_at",
                )
            )
        subjects_delete(ids)
        # The key stays (a retry of its request must not start the run again); its hash of the
        # request body goes (it would confirm a guessed input).
        RunStartKey.objects.filter(run_id__in=ids).update(request_hash="")
        threads = Q()
        for run in runs:
            threads |= Q(idempotency_key__startswith=f"{run.thread_id}:")
        for model in SANDBOXES:
            model.objects.filter(threads).delete()
        event_record(
            action="erasure.performed",
            actor=user,
            data={
                "erasure_id": erasure.pk,
                "runs": erasure.run_ids,
                "reason": reason,
                "kind": kind,
                "legacy_values": legacy_values,
                "legacy_events": legacy_events,
            },
        )
    return erasure


def erasure_complete(erasure: Erasure) -> bool:
    """Step B: delete the runs' checkpoints, then mark the erasure completed (once)."""
    saver = checkpointer_get()
    threads = AgentRun.objects.filter(pk__in=erasure.run_ids).values_list("thread_id", flat=True)
    for thread_id in threads:
        saver.delete_thread(thread_id)
    now = timezone.now()
    with transaction.atomic():
        moved = Erasure.objects.filter(pk=erasure.pk, status=Erasure.Status.KEYS_DESTROYED).update(
            status=Erasure.Status.COMPLETED, completed_at=now
        )
        if moved:
            erasure.status, erasure.completed_at = Erasure.Status.COMPLETED, now
            event_record(
                action="erasure.completed",
                actor=ACTOR,
                data={"erasure_id": erasure.pk, "runs": erasure.run_ids},
            )
    _free_pages_overwrite(saver)
    return bool(moved)


def erasures_resume(*, limit: int = BATCH) -> int:
    """Complete erasures a crash left between their two steps (the sweep, ``erase --resume``).
    Returns how many were completed."""
    done = 0
    pending = Erasure.objects.filter(status=Erasure.Status.KEYS_DESTROYED).order_by("id")
    for erasure in list(pending[:limit]):
        try:
            done += erasure_complete(erasure)
        except Exception:  # noqa: BLE001 - one failing erasure must not stop the others
            log.exception("erasure #%s could not be completed; the next pass retries", erasure.pk)
    return done


def _free_pages_overwrite(saver: Any) -> None:
    """SQLite: move the write-ahead logs into the files (``secure_delete`` is on for both
    connections, so deleted rows are overwritten there) and empty them. Postgres keeps dead
    tuples until (auto)vacuum; see docs/operations.md."""
    if connection.vendor == "sqlite" and not connection.in_atomic_block:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    cursor_of = getattr(saver, "cursor", None)
    if connection.vendor == "sqlite" and cursor_of is not None:
        with cursor_of(transaction=False) as cur:
            cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def compliance_erase_grant(*, using: str = "default") -> Group:
    """The compliance group may erase (its migration grants it; this keeps it after a flush)."""
    group = compliance_group_ensure(using=using)
    content_type = ContentType.objects.db_manager(using).get_for_model(Erasure)
    permission, _ = Permission.objects.using(using).get_or_create(
        content_type=content_type,
        codename="erase_run",
        defaults={"name": "Can erase the personal data of runs"},
    )
    group.permissions.add(permission)
    return group
