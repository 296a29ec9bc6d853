"""The autonomy advice page (/autonomy/) and its Apply / Start shadow form (docs/autonomy.md).

Managers (those who may view the metrics) see the advice; admins with the permission
approvals.change_autonomyrule apply it. The page's figures are never posted back: the
service recomputes the advice when it is applied.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from approvals.advice import SCOPES, Advice, AdviceReport
from approvals.advice_selectors import AdviceWindowInvalid, advice_days, autonomy_advice_report
from approvals.services.autonomy_advice import APPLY_PERMISSION, autonomy_advice_apply
from console.metrics.definitions import user_may_view_metrics
from core.errors import ApplicationError

SCOPE_LABELS = {"tool": "By tool", "tier": "By tier"}
DAY_CHOICES = (7, 30, 90)
REASON_LABELS = {
    "wrong_target": "wrong target",
    "wrong_amount": "wrong amount",
    "not_needed": "not needed",
    "unsafe": "unsafe",
    "other": "other",
}


def _require_manager(request: HttpRequest) -> None:
    if not user_may_view_metrics(request.user):
        raise PermissionDenied("Only managers and admins may see the autonomy advice.")


def _row(advice: Advice) -> dict[str, Any]:
    figures = advice.figures.as_dict()
    reasons = [(REASON_LABELS[k], n) for k, n in advice.figures.reasons.items() if n]
    return {"advice": advice, "f": figures, "reasons": reasons}


def _context(
    request: HttpRequest, *, report: AdviceReport | None, scope: str, days: int | None
) -> dict[str, Any]:
    rows = []
    if report is not None:
        rows = [_row(a) for a in (report.tools if scope == "tool" else report.tiers)]
    return {
        "report": report,
        "rows": rows,
        "scope": scope,
        "days": days,
        "scopes": [(key, SCOPE_LABELS[key]) for key in SCOPES],
        "day_choices": DAY_CHOICES,
        "may_apply": request.user.has_perm(APPLY_PERMISSION),
        "thresholds": report.thresholds.as_dict() if report else None,
    }


@login_required
@require_GET
def autonomy_advice(request: HttpRequest) -> HttpResponse:
    _require_manager(request)
    scope = request.GET.get("scope") or "tool"
    if scope not in SCOPES:
        scope = "tool"
    try:
        days = advice_days(request.GET.get("days"))
    except AdviceWindowInvalid as exc:
        context = _context(request, report=None, scope=scope, days=None)
        context["error"] = str(exc)
        return render(request, "console/autonomy.html", context, status=400)
    report = autonomy_advice_report(days=days)
    return render(
        request, "console/autonomy.html", _context(request, report=report, scope=scope, days=days)
    )


@require_POST
@login_required
def autonomy_advice_apply_view(request: HttpRequest) -> HttpResponse:
    post = request.POST
    scope = post.get("scope", "")
    tab = scope.partition(":")[0] if scope.partition(":")[0] in SCOPES else "tool"
    try:
        rule = autonomy_advice_apply(
            user=request.user,
            scope=scope,
            target_mode=post.get("target_mode", ""),
            request=request,
            days=post.get("days"),
            sample_percent=post.get("sample_percent"),
            confidence_below=post.get("confidence_below"),
        )
    except ApplicationError as exc:
        if exc.status_code == 403:
            raise PermissionDenied(exc.message) from None
        report = None
        if user_may_view_metrics(request.user):
            try:
                report = autonomy_advice_report(days=advice_days(post.get("days")))
            except AdviceWindowInvalid:
                report = autonomy_advice_report()
        context = _context(request, report=report, scope=tab, days=report.days if report else None)
        context["error"] = exc.message
        context["errors"] = exc.errors
        return render(request, "console/autonomy.html", context, status=exc.status_code)
    what = f"tool {rule.tool}" if rule.tool else f"tier {rule.tier.name}"
    messages.success(request, f"The {what} is now in {rule.get_mode_display()} mode.")
    query = urlencode({"scope": tab, "days": post.get("days") or ""})
    return redirect(f"{reverse('autonomy')}?{query}")
