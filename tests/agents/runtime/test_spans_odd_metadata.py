"""A head checkpoint whose trace context is not text (a restored or hand-edited database) must
not fail the advance that links to it: tracing never costs a run (agents/runtime/spans.py)."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from agents.runtime.spans import TRACE_KEY, segment_link


@pytest.mark.parametrize("stored", [12345, b"00-0af7651916cd43dd8448eb211c80319c-01", ["x"], {}])
def test_a_segment_ignores_a_previous_trace_context_that_is_not_text(stored):
    tracer = TracerProvider().get_tracer("test")
    with trace.use_span(tracer.start_span("run.segment"), end_on_exit=True) as span:
        segment_link({TRACE_KEY: stored})

    assert span.links == ()
