"""The Prometheus counters and histograms observed where things happen (no database access).

Every process holds these in memory, or, when ``PROMETHEUS_MULTIPROC_DIR`` is set in its
environment before prometheus_client is imported (``manage.py serve`` sets it for gunicorn and
the qcluster), in per-process files under that directory that a scrape from any web process
adds up (``exposition``). The gauges (queue depth, runs by status, stuck items ...) are not
here: they are read from the database at scrape time (console/prometheus.py).
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Callable, Iterable

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    values,
)
from prometheus_client.multiprocess import MultiProcessCollector


def _process_identifier_new() -> Callable[[], str]:
    """This process's name in the multiprocess directory: host and pid, not the pid alone.
    Containers (compose's web and worker) share the directory on one volume and each numbers
    its processes from 1; two processes writing one file overwrite each other's counts."""
    host = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname()) or "host"
    return lambda: f"{host}-{os.getpid()}"


if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):  # before any metric below is made
    values.ValueClass = values.MultiProcessValue(process_identifier=_process_identifier_new())

# Seconds from request to final decision: people take minutes to days.
DECISION_BUCKETS = (5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400)
# One advance is bounded by RUN_ADVANCE_DEADLINE_SECONDS (27 s by default).
ADVANCE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 45, 60)

DECISION_LATENCY = Histogram(
    "console_decision_latency_seconds",
    "Seconds from an approval request to its final decision by people",
    ["tier", "decision"],
    buckets=DECISION_BUCKETS,
)
ADVANCE_DURATION = Histogram(
    "console_advance_duration_seconds",
    "Seconds one advance of a run took (one django-q2 task)",
    ["outcome"],
    buckets=ADVANCE_BUCKETS,
)
NOTIFICATION_FAILURES = Counter(
    "console_notification_failures",
    "Failed notification delivery attempts (outcome retry: tried again later; failed: for good)",
    ["channel", "outcome"],
)

# The first word of an advance's outcome ("waiting", "retrying in 2.0s: ..." -> "retrying"):
# a label with few values, whatever the message says.
ADVANCE_OUTCOMES = frozenset(
    {
        "waiting",
        "completed",
        "continuing",
        "skipped",
        "stopped",
        "flagged",
        "cancelled",
        "retrying",
        "dead",
        "failed",
        "nothing",
    }
)


def advance_outcome_label(outcome: str) -> str:
    word = outcome.split(":", 1)[0].split(" ", 1)[0].strip().lower()
    return word if word in ADVANCE_OUTCOMES else "other"


log = logging.getLogger(__name__)


def _never_raise(observe: Callable[[], None], metric: str) -> None:
    """A metric is never worth the work it measures: with PROMETHEUS_MULTIPROC_DIR full or
    read-only prometheus_client raises OSError, after a decision committed (on commit), in a
    notification's failure path, in an advance's ``finally``. Logged and dropped."""
    try:
        observe()
    except Exception:  # noqa: BLE001 - see above
        log.warning("metric %s not recorded", metric, exc_info=True)


def decision_observe(*, tier: str, decision: str, seconds: float) -> None:
    _never_raise(
        lambda: DECISION_LATENCY.labels(tier=tier, decision=decision).observe(max(0.0, seconds)),
        "console_decision_latency_seconds",
    )


def advance_observe(*, outcome: str, seconds: float) -> None:
    label = advance_outcome_label(outcome)
    _never_raise(
        lambda: ADVANCE_DURATION.labels(outcome=label).observe(max(0.0, seconds)),
        "console_advance_duration_seconds",
    )


def notification_failure_count(*, channel: str, final: bool) -> None:
    outcome = "failed" if final else "retry"
    _never_raise(
        lambda: NOTIFICATION_FAILURES.labels(channel=channel, outcome=outcome).inc(),
        "console_notification_failures",
    )


def multiprocess_dir() -> str:
    """The shared directory of this machine's processes, or "" (each process on its own)."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")


class _Forward:
    """Collects another registry's metrics into a scrape's registry."""

    def __init__(self, source: CollectorRegistry) -> None:
        self.source = source

    def collect(self) -> Iterable:
        return self.source.collect()


def exposition(*, extra: Iterable[object] = (), path: str | None = None) -> bytes:
    """The text exposition of the observed metrics plus the ``extra`` collectors.

    With a multiprocess directory (``path``, else the environment's), the values of every
    process that wrote there are added up; otherwise this process's own registry."""
    registry = CollectorRegistry()
    path = multiprocess_dir() if path is None else path
    if path:
        MultiProcessCollector(registry, path=path)
    else:
        registry.register(_Forward(REGISTRY))
    for collector in extra:
        registry.register(collector)
    return generate_latest(registry)
