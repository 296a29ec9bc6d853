"""The ``run.segment`` span: one per advance of a run, and the dead-letter event.

Segments of one run share ``run.id`` and ``thread.id``. Each segment that writes checkpoints
leaves its span context in their metadata (``TRACE_KEY``); the next segment reads the head
checkpoint anyway, so it links to that segment at no cost. Without a configured tracer
provider these are OpenTelemetry's no-op spans (console/tracing.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_tracer = trace.get_tracer("agents.runtime")
_propagator = TraceContextTextMapPropagator()
TRACE_KEY = "otel_traceparent"  # in checkpoint metadata: the segment that wrote it
_FAILED = {"failed", "dead"}


@contextmanager
def segment_span(run: Any) -> Iterator[Any]:
    """The span of one advance of ``run`` (the caller sets the outcome)."""
    with _tracer.start_as_current_span(
        "run.segment",
        attributes={
            "run.id": str(run.pk),
            "thread.id": run.thread_id,
            "agent": run.agent,
            "graph.version": run.graph_version,
            "resume_count": run.resume_count,
        },
    ) as span:
        yield span


def segment_outcome(span: Any, outcome: str) -> None:
    """``run.outcome`` from what the advance returned: waiting, completed, failed, dead,
    lease_lost, cancelled, flagged, continuing, retrying, stopped, nothing_to_do."""
    if outcome.startswith("stopped: lease lost"):
        kind = "lease_lost"
    else:
        kind = outcome.split(":")[0].split(" in ")[0].replace(" ", "_")
    span.set_attribute("run.outcome", kind)
    if kind in _FAILED:
        span.set_status(Status(StatusCode.ERROR, kind))


def segment_resumed(run: Any, *, version: str) -> None:
    """The segment resumes (or starts) ``run`` under ``version``: what the row says now."""
    span = trace.get_current_span()
    span.set_attribute("resume_count", run.resume_count)
    span.set_attribute("graph.version", version)


def segment_link(metadata: dict[str, Any] | None) -> None:
    """Link this segment to the one that wrote the head checkpoint (its ``TRACE_KEY``)."""
    traceparent = (metadata or {}).get(TRACE_KEY)
    span = trace.get_current_span()
    # Anything but text (a restored or edited database) is no link, never a failed advance.
    if not isinstance(traceparent, str) or not traceparent or not span.is_recording():
        return
    previous = trace.get_current_span(_propagator.extract({"traceparent": traceparent}))
    if previous.get_span_context().is_valid:
        span.add_link(previous.get_span_context(), {"link.kind": "previous_segment"})


def segment_traceparent() -> str | None:
    """This segment's span context as a W3C traceparent, for the checkpoint metadata."""
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get("traceparent")


def dead_letter_event(run: Any, *, error: str, failures: int, retryable: bool) -> None:
    """The run went dead and was escalated to a person: an event on its segment."""
    span = trace.get_current_span()
    span.add_event(
        "run.dead_letter",
        {
            "run.id": str(run.pk),
            "agent": run.agent,
            "error.type": error.split(":")[0],
            "failures": failures,
            "retryable": retryable,
        },
    )
    span.set_status(Status(StatusCode.ERROR, "dead"))
