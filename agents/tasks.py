"""django-q2 tasks. Each fetches by id and calls one service."""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.utils import timezone

from approvals.models import AgentRun

log = logging.getLogger(__name__)


def run_advance(run_id: str) -> str:
    from django.db import close_old_connections

    from agents.runner import run_advance as advance

    close_old_connections()
    outcome = advance(run_id=run_id)
    log.info("run %s: %s", run_id, outcome)
    return outcome


def runs_recover() -> int:
    """Re-enqueue runs whose worker died: a lapsed lease, or queued with no task for a while."""
    from approvals.services import run_advance_enqueue

    now = timezone.now()
    lapsed = AgentRun.objects.filter(
        status__in=[AgentRun.Status.RUNNING, AgentRun.Status.QUEUED], lease_expires_at__lt=now
    )
    stale_queued = AgentRun.objects.filter(
        status=AgentRun.Status.QUEUED,
        lease_expires_at__isnull=True,
        updated_at__lt=now - dt.timedelta(seconds=settings.Q_RETRY),
    )
    # A worker that lost its lease through its own failure, or died before the status moved on.
    orphaned = AgentRun.objects.filter(
        status__in=[AgentRun.Status.RUNNING, AgentRun.Status.QUEUED],
        lease_expires_at__isnull=True,
        updated_at__lt=now - dt.timedelta(seconds=settings.Q_RETRY),
    )
    # Woken (a decision, an expiry, a cancel) but the task never ran: the process died
    # between the commit and the enqueue, or its task was dropped.
    unwoken = AgentRun.objects.filter(
        wake_requested=True,
        lease_expires_at__isnull=True,
        updated_at__lt=now - dt.timedelta(seconds=settings.Q_RETRY),
    )
    ids = set(lapsed.values_list("id", flat=True)) | set(stale_queued.values_list("id", flat=True))
    ids |= set(orphaned.values_list("id", flat=True)) | set(unwoken.values_list("id", flat=True))
    for run_id in ids:
        run_advance_enqueue(run_id=run_id)
    return len(ids)
