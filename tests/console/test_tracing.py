"""Tracing is set up once per process, only when OTEL_EXPORTER_OTLP_ENDPOINT is set: then
spans go over OTLP/HTTP to that endpoint (a fake collector here, no network), from the process
and from the workers it forks; unset, nothing is installed beyond the no-op API."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.support.processes import database_url_for_tests, process_env
from tests.support.traces import Collector, collector_running

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db

UNSET = """
import json, sys
import django
django.setup()
from django.conf import settings
from opentelemetry import trace
from approvals.tracing import tracing_on
print(json.dumps({
    "provider": type(trace.get_tracer_provider()).__name__,
    # (langsmith imports the SDK's modules itself; the exporter is ours alone)
    "exporter_loaded": any(name.startswith("opentelemetry.exporter") for name in sys.modules),
    "instrumentations_loaded": any(
        name.startswith("opentelemetry.instrumentation.") for name in sys.modules
    ),
    "middleware": [m for m in settings.MIDDLEWARE if "opentelemetry" in m],
    "tracing_on": tracing_on(),
}))
"""

SET = """
import json, multiprocessing, os
import django
django.setup()
from django.conf import settings
from django.db import connection
from opentelemetry import trace
from opentelemetry.instrumentation.django import DjangoInstrumentor
from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

tracer = trace.get_tracer("probe")
provider = trace.get_tracer_provider()
with connection.cursor() as cursor:  # a query outside any request or run: not kept
    cursor.execute("SELECT 2")
with tracer.start_as_current_span("probe.parent"):
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
provider.force_flush()  # the parent has talked to the collector before it forks

pid = os.fork()
if pid == 0:
    with tracer.start_as_current_span("probe.forked"):
        pass
    provider.force_flush()
    os._exit(0)
os.waitpid(pid, 0)

def work():  # a qcluster worker that ends normally, without flushing itself
    with tracer.start_as_current_span("probe.worker"):
        pass

from django.test import Client
assert Client().get("/login/").status_code == 200  # a request: the Django instrumentation

worker = multiprocessing.get_context("fork").Process(target=work)
worker.start()
worker.join()
print(json.dumps({
    "provider": type(provider).__name__,
    "django": DjangoInstrumentor().is_instrumented_by_opentelemetry,
    "psycopg": PsycopgInstrumentor().is_instrumented_by_opentelemetry,
    "middleware": [m for m in settings.MIDDLEWARE if "opentelemetry" in m],
    "worker_exit": worker.exitcode,
}))
"""


@pytest.fixture
def collector() -> Iterator[Collector]:
    with collector_running() as receiver:
        yield receiver


def _python(script: str, **env: str) -> dict[str, Any]:
    clean = process_env(database_url=database_url_for_tests(), extra=env)
    for name in [k for k in clean if k.startswith("OTEL_") and k not in env]:
        del clean[name]
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "env",
    [{}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_SDK_DISABLED": "true"}],
    ids=["no endpoint", "disabled"],
)
def test_without_an_endpoint_setup_installs_nothing_beyond_the_no_op_api(env):
    seen = _python(UNSET, **env)
    assert seen == {
        "provider": "ProxyTracerProvider",
        "exporter_loaded": False,
        "instrumentations_loaded": False,
        "middleware": [],
        "tracing_on": False,
    }


def test_with_an_endpoint_spans_go_over_otlp_http_from_the_process_and_its_forks(collector):
    seen = _python(SET, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url, OTEL_SERVICE_NAME="probe-svc")
    assert seen["provider"] == "TracerProvider"
    assert seen["django"] is True and seen["psycopg"] is True
    assert seen["middleware"] == [
        "opentelemetry.instrumentation.django.middleware.otel_middleware._DjangoMiddleware"
    ]
    assert seen["worker_exit"] == 0

    assert collector.requests
    assert {r["path"] for r in collector.requests} == {"/v1/traces"}
    assert {r["type"] for r in collector.requests} == {"application/x-protobuf"}
    spans = collector.spans()
    assert {resource["service.name"] for resource, _ in spans} == {"probe-svc"}
    by_name = {span.name: span for _, span in spans}
    assert {"probe.parent", "probe.forked", "probe.worker"} <= set(by_name)
    (request,) = [span for _, span in spans if span.kind == span.SPAN_KIND_SERVER]
    assert request.name == "GET login/"  # the route
    if connection.vendor == "postgresql":
        # The psycopg instrumentation: the query inside the span is its child; the one
        # outside any request or run is not kept.
        parent = by_name["probe.parent"].span_id
        (query,) = [span for _, span in spans if span.parent_span_id == parent]
        assert query.kind == query.SPAN_KIND_CLIENT
        assert all(span.parent_span_id for _, span in spans if span.kind == span.SPAN_KIND_CLIENT)


def test_an_endpoint_that_is_not_an_http_url_stops_start_up_naming_the_variable():
    env = process_env(
        database_url=database_url_for_tests(),
        extra={"OTEL_EXPORTER_OTLP_ENDPOINT": "otel-collector:4318"},
    )
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "ImproperlyConfigured: OTEL_EXPORTER_OTLP_ENDPOINT must be an http" in done.stderr
