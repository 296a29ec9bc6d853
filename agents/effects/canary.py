"""A canary run's effects never run (docs/autonomy.md).

The claim's fenced INSERT refuses any effect of a run that has a Canary row (the NOT EXISTS in
agents/effects/claim.py: one statement, no window); the fence and the approval read say why
and audit "effect.refused" {"reason": "canary run"}.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

from django.db import transaction

from agents.effects.errors import LedgerError
from audit.services import event_record

ACTOR = "system:ledger"


# The runs being planted in this context (agents/canary.py): their graph runs to its gate
# before their Canary row exists, and the ledger refuses their effects meanwhile too.
_planting: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "canary_planting", default=frozenset()
)


@contextlib.contextmanager
def canary_planting(run_id: Any) -> Iterator[None]:
    """While this block runs, every effect of ``run_id`` is refused as a canary run's."""
    token = _planting.set(_planting.get() | {str(run_id)})
    try:
        yield
    finally:
        _planting.reset(token)


def canary_is_planting(run_id: Any) -> bool:
    return str(run_id) in _planting.get()


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
