"""Operations endpoints: Prometheus ``/metrics``, ``/healthz`` (alive) and ``/readyz`` (ready),
and the staff ops page (checkpoint storage, retention policies in force, the last passes).

The endpoints need no session; ``/metrics`` is guarded by a token or the client's network
(console/prometheus.py); ``/readyz`` names its failing checks to anyone (a load balancer's
probe) and their reasons only to those who may scrape ``/metrics``.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from agents.retention_selectors import (
    checkpoint_storage,
    retention_policies_in_force,
    retention_summary,
)
from console.health import readiness
from console.prometheus import ConsoleCollector, metrics_access
from core.prometheus import exposition


@never_cache
@require_GET
def metrics_scrape(request: HttpRequest) -> HttpResponse:
    refused = metrics_access(request)
    if refused:
        response = HttpResponse(
            "metrics: not allowed\n", status=refused, content_type="text/plain; charset=utf-8"
        )
        if refused == 401:
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(exposition(extra=[ConsoleCollector()]), content_type=CONTENT_TYPE_LATEST)


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """The process answers: no database, nothing else (a liveness probe)."""
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """200 when every check passes, else 503 naming each failing one. The reasons (which may
    name hosts) only for those who may scrape /metrics."""
    ready, checks = readiness()
    if metrics_access(request):
        checks = {name: {"ok": result["ok"]} for name, result in checks.items()}
    body = {
        "status": "ok" if ready else "unavailable",
        "failing": [name for name, result in checks.items() if not result["ok"]],
        "checks": checks,
    }
    return JsonResponse(body, status=200 if ready else 503)


def user_may_view_ops(user) -> bool:
    return bool(user.is_active and (user.is_staff or user.is_superuser))


@login_required
@require_GET
def ops(request: HttpRequest) -> HttpResponse:
    if not user_may_view_ops(request.user):
        raise PermissionDenied("Only staff may see the operations page.")
    context = {
        "storage": checkpoint_storage(),
        "database": "PostgreSQL" if connection.vendor == "postgresql" else "SQLite",
        "policies": retention_policies_in_force(),
        "retention": retention_summary(),
    }
    return render(request, "console/ops.html", context)
