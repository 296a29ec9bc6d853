"""A canary run's effects never run (docs/autonomy.md).

The claim's fenced INSERT refuses any effect of a run that has a Canary row (the NOT EXISTS in
agents/effects/claim.py: one statement, no window); the fence and the approval read say why
and audit "effect.refused" {"reason": "canary run"}.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from agents.effects.errors import LedgerError
from audit.services import event_record

ACTOR = "system:ledger"


class CanaryRunRefused(LedgerError):
    """The run is a canary (a test proposal planted by compliance): none of its effects run."""

    reason = "canary run"
    run_id: Any = None
    approval_id: int | None = None


def canary_refuse(*, run_id: Any, approval_id: int | None = None) -> None:
    """Raise CanaryRunRefused; the ledger audits it once the claim's transaction is over
    (``canary_audit``: an event written inside it would roll back with it)."""
    exc = CanaryRunRefused(
        f"run {run_id} is a canary (a test proposal planted by compliance): "
        "its tools are inert, nothing runs"
    )
    exc.run_id, exc.approval_id = run_id, approval_id
    raise exc


def refusal_audit(exc: Any, *, key: str, tool: str) -> None:
    """Audit "effect.refused" {"reason": exc.reason} (a canary run, an action undone before it
    ran) in a transaction of its own."""
    with transaction.atomic():
        event_record(
            action="effect.refused",
            actor=ACTOR,
            run_id=exc.run_id,
            approval_id=exc.approval_id,
            tool=tool,
            data={"key": key, "reason": exc.reason},
        )
