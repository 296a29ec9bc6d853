"""OpenTelemetry traces: set up once per process, only when a collector is configured.

``OTEL_EXPORTER_OTLP_ENDPOINT`` set: a TracerProvider exporting in batches over OTLP/HTTP,
plus the Django and psycopg instrumentations. Unset: nothing is installed; the spans the code
opens (run segments, approval waits, tool calls) go to OpenTelemetry's no-op API. The
standard ``OTEL_*`` variables (service name, resource attributes, headers, sampler, batch
sizes, ...) are read by the SDK itself. docs/operations.md, "Observability: traces".
"""

from __future__ import annotations

import logging
import multiprocessing.util
import os
import threading
from typing import Any

from django.conf import settings

log = logging.getLogger(__name__)

_lock = threading.Lock()
_installed: dict[str, Any] = {"provider": None}


def tracing_setup() -> Any | None:
    """Install the provider and the instrumentations for this process, once; None when
    tracing is off. Called from ``ConsoleConfig.ready`` (web server, qcluster, commands)."""
    if not settings.OTEL_EXPORTER_OTLP_ENDPOINT or settings.OTEL_SDK_DISABLED:
        return None
    with _lock:
        if _installed["provider"] is not None:
            return _installed["provider"]
        from opentelemetry import trace
        from opentelemetry.instrumentation.django import DjangoInstrumentor
        from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

        provider = tracing_provider()
        trace.set_tracer_provider(provider)
        DjangoInstrumentor().instrument(tracer_provider=provider)
        PsycopgInstrumentor().instrument(tracer_provider=provider)
        _installed["provider"] = provider
        log.info("traces export over OTLP/HTTP to %s", settings.OTEL_EXPORTER_OTLP_ENDPOINT)
        return provider


def tracing_provider() -> Any:
    """A TracerProvider that batches spans to the OTLP/HTTP exporter the ``OTEL_*``
    variables describe (not installed: ``tracing_setup`` does that)."""
    import requests
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    session = requests.Session()
    # The exporter reads OTEL_EXPORTER_OTLP_ENDPOINT (adding /v1/traces), or the
    # OTEL_EXPORTER_OTLP_TRACES_* overrides, headers, timeout and compression.
    exporter = OTLPSpanExporter(session=session)
    provider = TracerProvider(
        resource=Resource.create({SERVICE_NAME: settings.OTEL_SERVICE_NAME}),
        # OTEL_TRACES_SAMPLER, when set, wins; else every trace is kept except queries that
        # belong to no request or run (the task broker's polling).
        sampler=None if os.environ.get("OTEL_TRACES_SAMPLER") else _sampler(),
    )
    processor = BatchSpanProcessor(exporter)
    provider.add_span_processor(processor)
    _after_fork(session, processor)
    return provider


def _after_fork(session: Any, processor: Any) -> None:
    """qcluster forks its workers from a process that holds the provider. The batch processor
    restarts its thread in a child by itself; a keep-alive connection to the collector must
    not be shared, so the child drops its copy. A worker that ends normally (django-q2
    recycles them) sends what it still holds: a forked child skips ``atexit``."""

    def in_child() -> None:
        session.close()

    os.register_at_fork(after_in_child=in_child)
    multiprocessing.util.register_after_fork(
        processor,
        lambda proc: multiprocessing.util.Finalize(proc, proc.force_flush, exitpriority=10),
    )


def _sampler() -> Any:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased, Sampler
    from opentelemetry.trace import SpanKind

    class RootsButQueries(Sampler):
        """Keeps every root span except a client span (a query) outside a request or run."""

        def should_sample(self, parent_context, trace_id, name, kind=None, **kwargs):  # noqa: ANN001, ANN003
            chosen = ALWAYS_OFF if kind == SpanKind.CLIENT else ALWAYS_ON
            return chosen.should_sample(parent_context, trace_id, name, kind, **kwargs)

        def get_description(self) -> str:
            return "RootsButQueries"

    return ParentBased(root=RootsButQueries())
