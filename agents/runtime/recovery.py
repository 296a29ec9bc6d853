"""Recovery: re-enqueue runs whose worker died or whose wake-up was lost (on the sweep)."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.utils import timezone

from approvals.models import AgentRun
from approvals.services import run_advance_enqueue


def runs_recover() -> int:
    """Re-enqueue runs whose worker died: a lapsed lease, or queued with no task for a while."""
    now = timezone.now()
    stale = now - dt.timedelta(seconds=settings.Q_RETRY)
    # A flagged run waits for a person (run_unflag wakes it): never taken for a dead worker.
    lapsed = AgentRun.objects.filter(
        status__in=[AgentRun.Status.RUNNING, AgentRun.Status.QUEUED],
        lease_expires_at__lt=now,
        flag="",
    )
    # Queued with no task for a while, a worker that lost its lease through its own failure,
    # or one that died before the status moved on.
    orphaned = AgentRun.objects.filter(
        status__in=[AgentRun.Status.RUNNING, AgentRun.Status.QUEUED],
        lease_expires_at__isnull=True,
        updated_at__lt=stale,
        flag="",
    )
    # Woken (a decision, an expiry, a cancel) but the task never ran: the process died
    # between the commit and the enqueue, or its task was dropped.
    unwoken = AgentRun.objects.filter(
        wake_requested=True, lease_expires_at__isnull=True, updated_at__lt=stale
    )
    ids = set(lapsed.values_list("id", flat=True)) | set(orphaned.values_list("id", flat=True))
    ids |= set(unwoken.values_list("id", flat=True))
    for run_id in ids:
        run_advance_enqueue(run_id=run_id)
    return len(ids)
