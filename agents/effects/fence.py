"""The ledger's fence: no effect of a cancelled run starts (compensations still run), and
none unless this worker still holds the run's live lease (invariants 6 and 14)."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from agents.effects.errors import LeaseNotHeld, RunCancelled
from approvals.models import AgentRun


def fence(run_id: str, *, compensating: bool, owner: str | None) -> None:
    """Refuse a new effect of a cancelled run (compensations still run), and any effect unless
    worker ``owner`` still holds the run's live lease (None: not called inside a run)."""
    run = (
        AgentRun.objects.filter(pk=run_id)
        .only("cancel_requested", "lease_owner", "lease_expires_at")
        .first()
    )
    if run is None:
        return
    fence_check(
        run_id,
        compensating=compensating,
        owner=owner,
        cancel_requested=run.cancel_requested,
        lease_owner=run.lease_owner,
        lease_expires_at=run.lease_expires_at,
    )


def fence_check(
    run_id: str,
    *,
    compensating: bool,
    owner: str | None,
    cancel_requested: bool,
    lease_owner: str,
    lease_expires_at: dt.datetime | None,
) -> None:
    """``fence`` on the run's fields as just read."""
    if cancel_requested and not compensating:
        raise RunCancelled(f"run {run_id} was cancelled: no new effect starts")
    if owner is None:
        return
    if lease_owner != owner or not lease_expires_at or lease_expires_at <= timezone.now():
        raise LeaseNotHeld(f"worker {owner} lost the lease of run {run_id}")
