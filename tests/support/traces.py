"""Spans recorded in memory, and a fake OTLP/HTTP collector for processes that export.

Recorded in memory: the SDK's ``InMemorySpanExporter`` behind a ``SimpleSpanProcessor``.

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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
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


class Collector:
    """An OTLP/HTTP receiver: records each request's path, content type and decoded spans."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real collector

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                collector.requests.append(
                    {"path": self.path, "type": self.headers["Content-Type"], "body": request}
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[tuple[dict[str, Any], Any]]:
        """(resource attributes, span) of everything received."""
        found = []
        for request in self.requests:
            for resource_spans in request["body"].resource_spans:
                resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                for scope in resource_spans.scope_spans:
                    found.extend((resource, span) for span in scope.spans)
        return found


def otlp_attributes(span: Any) -> dict[str, Any]:
    """The attributes of an OTLP span (or event) as a dict of plain values."""
    values: dict[str, Any] = {}
    for item in span.attributes:
        kind = item.value.WhichOneof("value")
        values[item.key] = getattr(item.value, kind) if kind else None
    return values


@contextlib.contextmanager
def collector_running() -> Iterator[Collector]:
    """A Collector serving on a free port of 127.0.0.1 until the block ends."""
    receiver = Collector()
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
