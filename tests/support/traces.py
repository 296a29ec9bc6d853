"""Spans recorded in memory: the SDK's ``InMemorySpanExporter`` behind a ``SimpleSpanProcessor``.

OpenTelemetry takes a global tracer provider once per process, so the first use installs one
(as console/tracing.py would) and keeps it; the processor hands spans to the exporter only
while a test records, so other tests keep nothing. A test module asks for it with::

    @pytest.fixture
    def spans():
        with spans_recorded() as recorded:
            yield recorded
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_lock = threading.Lock()


class _Recording(SimpleSpanProcessor):
    """A SimpleSpanProcessor that exports only while ``on``."""

    on = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            super().on_end(span)


_state: dict[str, Any] = {"exporter": None, "processor": None}


def _install() -> tuple[InMemorySpanExporter, _Recording]:
    with _lock:
        if _state["exporter"] is None:
            provider = trace.get_tracer_provider()
            if not isinstance(provider, TracerProvider):
                provider = TracerProvider()
                trace.set_tracer_provider(provider)
            exporter = InMemorySpanExporter()
            processor = _Recording(exporter)
            provider.add_span_processor(processor)
            _state.update(exporter=exporter, processor=processor)
        return _state["exporter"], _state["processor"]


class Spans:
    """The finished spans of one test."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self._exporter = exporter

    def all(self) -> list[ReadableSpan]:
        return list(self._exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.all() if span.name == name]

    def clear(self) -> None:
        self._exporter.clear()


@contextlib.contextmanager
def spans_recorded() -> Iterator[Spans]:
    exporter, processor = _install()
    exporter.clear()
    processor.on = True
    try:
        yield Spans(exporter)
    finally:
        processor.on = False
        exporter.clear()
