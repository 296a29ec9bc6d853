"""The ``approval.wait`` span: from an approval's creation to its final outcome.

Emitted once the outcome is committed (a decision, an expiry by the sweep, a cancelled run), with
the approval's own times, so a wait of days is one span. It measures people, not the system:
``slo.exclude`` marks it to leave out of latency SLOs. Without a configured tracer provider
nothing is registered at all (console/tracing.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from opentelemetry import trace
from opentelemetry.context import Context

_tracer = trace.get_tracer("approvals")


def tracing_on() -> bool:
    """Whether a real tracer provider is installed (not the API's proxy or no-op)."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def approval_wait_record(*, approval: Any, decision: str, role: str) -> None:
    """After commit: the wait of one approval closed in the current transaction."""
    approvals_wait_record(approvals=[approval], decision=decision, role=role)


def approvals_wait_record(
    *, approvals: Iterable[Any], role: str, decision: str | None = None
) -> None:
    """After commit: the waits of approvals closed in the current transaction (``decision``
    None: each one's own stored decision, as the sweep's expiries apply their tier's default)."""
    if not tracing_on():
        return
    waits = [_attributes(a, decision=decision, role=role) for a in approvals]
    if waits:
        transaction.on_commit(lambda: [_emit(*wait) for wait in waits])


def _attributes(
    approval: Any, *, decision: str | None, role: str
) -> tuple[dt.datetime, dt.datetime, dict[str, Any]]:
    if decision is None:  # read only then: a caller may have loaded the row without it
        stored = approval.decision if isinstance(approval.decision, dict) else {}
        decision = stored.get("decision", "")
    attributes = {
        "approval.id": approval.pk,
        "run.id": str(approval.run_id),
        "tool": approval.tool,
        "approval.tier": approval.tier,
        "approval.status": str(approval.status),
        "approval.decision": str(decision),
        "approver.role": role,
        "slo.exclude": True,
    }
    return approval.created_at, approval.decided_at, attributes


def _emit(start: dt.datetime, end: dt.datetime, attributes: dict[str, Any]) -> None:
    # A trace of its own (it began long before the request or sweep that closed it), linked to
    # that request or sweep.
    closer = trace.get_current_span().get_span_context()
    span = _tracer.start_span(
        "approval.wait",
        context=Context(),
        start_time=_ns(start),
        attributes=attributes,
        links=[trace.Link(closer)] if closer.is_valid else None,
    )
    span.end(end_time=_ns(end))


def _ns(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)
