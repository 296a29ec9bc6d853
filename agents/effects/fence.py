"""The ledger's fence: no effect of a cancelled run starts (compensations still run), and
none unless this worker still holds the run's live lease (invariants 6 and 14); none of a
canary run, ever."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from typing import Any

from django.db.models import Exists, OuterRef
from django.utils import timezone

from agents.effects.canary import CanaryRunRefused, canary_refuse, refusal_audit
from agents.effects.errors import LeaseNotHeld, RunCancelled
from agents.effects.undone import ActionUndone
from approvals.models import AgentRun, Canary


def fence(run_id: str, *, compensating: bool, owner: str | None) -> None:
    """Refuse a new effect of a cancelled run (compensations still run), and any effect unless
    worker ``owner`` still holds the run's live lease (None: not called inside a run)."""
    run = (
        AgentRun.objects.filter(pk=run_id)
        .only("cancel_requested", "lease_owner", "lease_expires_at")
        .annotate(fence_canary=Exists(Canary.objects.filter(run_id=OuterRef("pk"))))
        .first()
    )
    if run is None:
        return
    if run.fence_canary:  # inert by construction: refused before anything else
        canary_refuse(run_id=run_id)
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


def refusal_audited(call: Callable[..., Any]) -> Callable[..., Any]:
    """Around one ledger call: a refusal (a canary run, an action undone before it ran) is
    audited once the call is over, so the event outlives the claim's rolled-back transaction."""

    @functools.wraps(call)
    def audited(*, key: str, tool: str, **kw: Any) -> Any:
        try:
            return call(key=key, tool=tool, **kw)
        except (CanaryRunRefused, ActionUndone) as exc:
            refusal_audit(exc, key=key, tool=tool)
            raise

    return audited
