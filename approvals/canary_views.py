"""Compliance's canary report page (docs/autonomy.md)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from approvals.canary_selectors import canary_report, user_may_read_canaries


@require_GET
@login_required
def canary_report_view(request: HttpRequest) -> HttpResponse:
    if not user_may_read_canaries(request.user):
        raise PermissionDenied("Only compliance and admins may read the canary report.")
    context = {
        **canary_report(fetched_by=request.user),
        "threshold": settings.AUTONOMY_CANARY_FATIGUE_CATCH_RATE,
    }
    return render(request, "approvals/canaries.html", context)
