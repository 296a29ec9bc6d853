"""Recovery: re-enqueue runs whose worker died or whose wake-up was lost (on the sweep).

Each of its three queries starts from a partial index (approvals migration 0015:
``run_lease_due``, ``run_orphan_due``, ``run_wake_due``), so a pass reads only the runs that
may need it, never the table. A pass takes at most ``RECOVERY_BATCH`` runs, least recently
touched first, queues them in one batch (``runs_advance_enqueue_many``) and touches them
(``updated_at``): the rest come first in the next pass a minute later, and a run just queued is
not queued again as orphaned or unwoken before ``Q_RETRY`` seconds. Recovery only queues: the
advance takes the lease (epoch fence), leaves a flagged run alone and honours a cancel.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from approvals.contract import EXTERNAL_AGENT_PREFIX
from approvals.models import AgentRun
from approvals.services.wake import runs_advance_enqueue_many

ACTIVE = (AgentRun.Status.RUNNING, AgentRun.Status.QUEUED)


def runs_recover(*, limit: int | None = None) -> int:
    """Re-enqueue runs whose worker died: a lapsed lease, or queued with no task for a while.

    At most ``limit`` (default ``RECOVERY_BATCH``) runs per pass; returns how many were queued.
    """
    limit = settings.RECOVERY_BATCH if limit is None else limit
    now = timezone.now()
    stale = now - dt.timedelta(seconds=settings.Q_RETRY)
    # A flagged run waits for a person (run_unflag wakes it): never taken for a dead worker.
    # Least recently touched first (each pass touches what it queues): a bounded pass never
    # starves the rest while the ones it queued wait in a busy queue.
    lapsed = AgentRun.objects.filter(
        status__in=ACTIVE, flag="", lease_expires_at__isnull=False, lease_expires_at__lt=now
    ).order_by("updated_at")
    # Queued with no task for a while, a worker that lost its lease through its own failure,
    # or one that died before the status moved on.
    # An external agent's run "runs" in its own service with no lease: nothing to recover.
    orphaned = (
        AgentRun.objects.filter(
            status__in=ACTIVE, flag="", lease_expires_at__isnull=True, updated_at__lt=stale
        )
        .exclude(agent__startswith=EXTERNAL_AGENT_PREFIX)
        .order_by("updated_at")
    )
    # Woken (a decision, an expiry, a cancel) but the task never ran: the process died
    # between the commit and the enqueue, or its task was dropped.
    unwoken = AgentRun.objects.filter(
        wake_requested=True, lease_expires_at__isnull=True, updated_at__lt=stale
    ).order_by("updated_at")
    # A worker died holding a waiting run (the lapsed query above takes only running and
    # queued runs): woken meanwhile, or woken before, its advance having taken the wake flag
    # with the lease (an external agent's run stays waiting while its requests close). A
    # release clears the lease, so a lapsed one on a waiting run is always a dead worker, and an
    # advance of a paused run is safe to repeat (invariant 10). A cancelled one, to compensate,
    # only when woken. The index run_status_lease (status, lease_expires_at) reads only these.
    unwoken_lapsed = AgentRun.objects.filter(
        Q(status=AgentRun.Status.WAITING)
        | Q(status=AgentRun.Status.CANCELLED, wake_requested=True),
        lease_expires_at__lt=now,
    ).order_by("updated_at")
    ids: dict[str, None] = {}
    for due in (lapsed, orphaned, unwoken, unwoken_lapsed):
        if len(ids) >= limit:
            break
        ids.update(dict.fromkeys(due.values_list("id", flat=True)[: limit - len(ids)]))
    return runs_advance_enqueue_many(run_ids=list(ids)[:limit], touch=True)
