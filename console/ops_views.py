"""The ops page (staff): checkpoint storage, retention policies in force, the last passes."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from agents.retention_selectors import (
    checkpoint_storage,
    retention_policies_in_force,
    retention_summary,
)


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
