"""The run lease: a row lock plus ``lease_expires_at``, kept alive by a heartbeat (invariant 6).

django-q2 delivers at least once: a second delivery of an advance while the lease is live does
nothing, and a worker whose heartbeat found the lease taken stops before changing anything.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import time
import uuid
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from approvals import services as approval_services
from approvals.models import AgentRun, Canary

log = logging.getLogger(__name__)


class LeaseLost(Exception):
    """Another worker took the run over (our heartbeat stopped in time)."""


class RunIsCanary(Exception):
    """The run is a canary (a test proposal compliance planted): it has no thread, and a
    resume would start its graph from scratch; it is never advanced."""


class RunErased(Exception):
    """The run's personal data was erased: it is never advanced again. (Its checkpoints are
    gone, and LangGraph would run a thread without checkpoints from START.)"""


def lease_owner_new() -> str:
    """A name for this attempt: host, process and a random part (two attempts never share it)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def lease_acquire(*, run_id: Any, owner: str) -> AgentRun | None:
    """Take the run's lease unless another live worker holds it; None when we may not run,
    ``RunErased`` when the run was erased (never advanced again).

    A compare-and-set, no transaction of its own: read the row, then one conditional UPDATE
    that moves only the row as read (same lease, same epoch, same ``updated_at``, which every
    transition, cancel and flag moves). Anything that changed it in between makes the UPDATE
    match nothing, and we read again; a heartbeat that extended the lease makes it held."""
    for _ in range(_CAS_ATTEMPTS):
        now = timezone.now()
        run = AgentRun.objects.filter(pk=run_id).annotate(is_canary=_CANARY).first()
        if run is None:
            return None
        if run.erased_at is not None:
            raise RunErased(f"run {run_id} was erased")
        if run.is_canary:
            raise RunIsCanary(f"run {run_id} is a canary")
        held = run.lease_owner and run.lease_expires_at and run.lease_expires_at > now
        if held and run.lease_owner != owner:
            return None
        # Whatever asked for this advance is now being handled: we read the state after this.
        taken = {
            "lease_owner": owner,
            "lease_expires_at": now + dt.timedelta(seconds=settings.RUN_LEASE_SECONDS),
            "lease_epoch": run.lease_epoch + 1,  # the fencing token of this lease
            "wake_requested": False,
            "updated_at": now,
        }
        moved = AgentRun.objects.filter(
            pk=run_id,
            erased_at__isnull=True,
            lease_owner=run.lease_owner,
            lease_expires_at=run.lease_expires_at,
            lease_epoch=run.lease_epoch,
            updated_at=run.updated_at,
        ).update(**taken)
        if moved:
            # Who held it before: a run still "running" here means that advance died mid-step.
            run.previous_lease_owner = run.lease_owner
            for name, value in taken.items():
                setattr(run, name, value)
            return run
    return _lease_acquire_locked(run_id=run_id, owner=owner)


# Read with the run: whether it is a canary's (approvals/canary_models.py), in the same query.
_CANARY = Exists(Canary.objects.filter(run_id=OuterRef("pk")))

# Each failed attempt means another writer moved the run meanwhile; then the row lock decides.
_CAS_ATTEMPTS = 3


def _lease_acquire_locked(*, run_id: Any, owner: str) -> AgentRun | None:
    """``lease_acquire`` under the row lock (when the run keeps changing under the CAS)."""
    now = timezone.now()
    with transaction.atomic():
        run = (
            AgentRun.objects.select_for_update().filter(pk=run_id).annotate(is_canary=_CANARY)
        ).first()
        if run is None:
            return None
        if run.erased_at is not None:
            raise RunErased(f"run {run_id} was erased")
        if run.is_canary:
            raise RunIsCanary(f"run {run_id} is a canary")
        held = run.lease_owner and run.lease_expires_at and run.lease_expires_at > now
        if held and run.lease_owner != owner:
            return None
        run.previous_lease_owner = run.lease_owner
        run.lease_owner = owner
        run.lease_expires_at = now + dt.timedelta(seconds=settings.RUN_LEASE_SECONDS)
        run.lease_epoch += 1
        run.wake_requested = False
        run.save(
            update_fields=[
                "lease_owner",
                "lease_expires_at",
                "lease_epoch",
                "wake_requested",
                "updated_at",
            ]
        )
    return run


def lease_epoch_raise(*, run_id: Any, owner: str, above: int) -> int:
    """Make this lease's epoch ``above + 1`` (while we hold it); the new epoch."""
    epoch = int(above) + 1
    if not AgentRun.objects.filter(pk=run_id, lease_owner=owner).update(lease_epoch=epoch):
        raise LeaseLost()
    return epoch


def lease_release(*, run_id: Any, owner: str) -> None:
    """Give the lease back; if an advance was asked for meanwhile, queue it now.

    One conditional UPDATE that returns the wake flag as it stood when the row was released:
    a decision committed before it is seen here, one committed after it queues its own
    advance, which then finds the lease free."""
    table = connection.ops.quote_name(AgentRun._meta.db_table)
    pk = AgentRun._meta.pk.get_db_prep_value(run_id, connection)
    # One statement: no transaction of its own (the queued advance goes out once it commits).
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET lease_owner = '', lease_expires_at = NULL"
            " WHERE id = %s AND lease_owner = %s RETURNING wake_requested",
            [pk, owner],
        )
        row = cursor.fetchone()
    if row is not None and row[0]:
        # Its own task was skipped while we held the lease (lost wake-up otherwise).
        approval_services.run_advance_enqueue(run_id=run_id, flagged=True)


def lease_margin_seconds() -> float:
    """How long before its expiry a worker stops trusting its lease (clock skew, pauses)."""
    return settings.RUN_LEASE_SECONDS / 4


class Heartbeat:
    """Extends the lease every RUN_HEARTBEAT_SECONDS while the run advances, and answers
    whether the lease is certainly still held (the checkpointer asks before every write)."""

    def __init__(self, *, run_id: Any, owner: str, epoch: int = 0, taken_at: float | None = None):
        self.run_id = run_id
        self.owner = owner
        self.epoch = epoch
        self.lost = threading.Event()
        # Monotonic time until which no other worker can have taken the lease: the expiry we
        # last wrote (counted from before the write), less the margin.
        start = time.monotonic() if taken_at is None else taken_at
        self.valid_until = start + settings.RUN_LEASE_SECONDS - lease_margin_seconds()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease-{run_id}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def assert_held(self) -> None:
        """Raise LeaseLost unless the lease is certainly ours."""
        if self.lost.is_set() or time.monotonic() > self.valid_until:
            raise LeaseLost()

    def _beat(self) -> None:
        try:
            while not self._stop.wait(settings.RUN_HEARTBEAT_SECONDS):
                started = time.monotonic()
                expires = timezone.now() + dt.timedelta(seconds=settings.RUN_LEASE_SECONDS)
                try:
                    kept = AgentRun.objects.filter(pk=self.run_id, lease_owner=self.owner).update(
                        lease_expires_at=expires
                    )
                except Exception:  # noqa: BLE001 - a blip: try again; the ledger fences effects
                    log.exception("lease heartbeat failed for run %s; retrying", self.run_id)
                    connection.close()
                    continue
                if not kept:  # another worker took the run over
                    self.lost.set()
                    return
                self.valid_until = started + settings.RUN_LEASE_SECONDS - lease_margin_seconds()
        finally:
            connection.close()
