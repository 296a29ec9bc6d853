"""Prometheus ``/metrics``: the gauges read at scrape time, plus the counters and histograms
observed where things happen (core/prometheus.py), and who may scrape.

The gauges come from cheap reads (approvals/ops_selectors.py): the trigger-kept counts of runs
by status and of pending approvals, one index read per tier for the oldest pending approval,
the small stuck-item and outbox tables, the in-doubt effects. A scrape costs the same few
queries however many runs there are (tests/console/test_prometheus.py counts them).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Iterator

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from agents.selectors import effects_in_doubt_count
from approvals import ops_selectors
from console.lockout import client_ip

log = logging.getLogger(__name__)


class ConsoleCollector:
    """The database's gauges, read when Prometheus scrapes."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The gauges and ``console_database_up`` 1; with the database unreachable only
        ``console_database_up`` 0 (the process's counters are still scraped, not a 500)."""
        try:
            families = list(self._gauges())
        except DatabaseError as exc:
            log.warning("metrics: the database gauges could not be read: %s", exc)
            families = []
        up = GaugeMetricFamily(
            "console_database_up", "Whether this scrape could read the database's gauges"
        )
        up.add_metric([], 1 if families else 0)
        yield up
        yield from families

    def _gauges(self) -> Iterator[GaugeMetricFamily]:
        now = timezone.now()
        pending = ops_selectors.ops_pending_by_tier()
        tiers = sorted(set(ops_selectors.ops_tier_names()) | set(pending))
        depth = GaugeMetricFamily(
            "console_approvals_pending", "Approvals waiting for a person, by tier", labels=["tier"]
        )
        for tier in tiers:
            depth.add_metric([tier], pending.get(tier, 0))
        yield depth
        oldest = ops_selectors.ops_oldest_pending_by_tier(list(pending))
        age = GaugeMetricFamily(
            "console_approvals_oldest_pending_age_seconds",
            "Age of the oldest pending approval, by tier (0: none pending)",
            labels=["tier"],
        )
        for tier in tiers:
            created = oldest.get(tier)
            age.add_metric([tier], max(0.0, (now - created).total_seconds()) if created else 0.0)
        yield age
        by_status = ops_selectors.ops_runs_by_status()
        runs = GaugeMetricFamily("console_runs", "Runs by status now", labels=["status"])
        for status, n in sorted(by_status.items()):
            runs.add_metric([status], n)
        yield runs
        yield GaugeMetricFamily(
            "console_runs_dead",
            "Runs that failed for good and were escalated",
            value=by_status.get("dead", 0),
        )
        stuck = GaugeMetricFamily(
            "console_stuck",
            "Open stuck items (escalated once, not yet cleared), by kind",
            labels=["kind"],
        )
        for kind, n in sorted(ops_selectors.ops_stuck_open_by_kind().items()):
            stuck.add_metric([kind], n)
        yield stuck
        yield GaugeMetricFamily(
            "console_effects_in_doubt",
            "Effects nobody knows happened yet (reconciliation or a person settles them)",
            value=effects_in_doubt_count(),
        )
        yield GaugeMetricFamily(
            "console_notifications_failed",
            "Notifications that failed for good (the outbox's failed rows)",
            value=ops_selectors.ops_notifications_failed(),
        )


def _bearer(request: HttpRequest) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


_RELAY_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")


def _relayed_untrusted(request: HttpRequest) -> bool:
    """A proxy relayed the request but none is trusted (TRUSTED_PROXY_COUNT=0): the address
    seen is the proxy's (often loopback, whoever the client is), so it proves nothing."""
    if settings.REST_FRAMEWORK.get("NUM_PROXIES"):
        return False
    return any(request.META.get(header) for header in _RELAY_HEADERS)


def metrics_access(request: HttpRequest) -> int:
    """0 when the request may scrape; else the status to refuse it with (401 or 403).

    A configured METRICS_TOKEN opens it from anywhere; a wrong token is 401 whatever the
    address. Without a token, the client's address must be in METRICS_ALLOWED_NETWORKS, and a
    request a proxy relayed counts only when TRUSTED_PROXY_COUNT says how many to skip."""
    sent = _bearer(request)
    expected = settings.METRICS_TOKEN
    if sent:
        if expected and hmac.compare_digest(sent.encode(), expected.encode()):
            return 0
        return 401
    if _relayed_untrusted(request):
        return 401 if expected else 403
    try:
        address = ipaddress.ip_address(client_ip(request) or "")
    except ValueError:
        return 403
    # A dual-stack socket shows an IPv4 client as ::ffff:a.b.c.d: match its IPv4 address.
    address = getattr(address, "ipv4_mapped", None) or address
    if any(address in network for network in settings.METRICS_ALLOWED_NETWORKS):
        return 0
    return 401 if expected else 403
