"""Console pages: the manager metrics page and its CSV export."""

from __future__ import annotations

import csv
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from approvals.ops_selectors import ops_stuck_open
from console import charts
from console.metrics.csv_export import report_csv_rows
from console.metrics.definitions import (
    GROUP_DEFAULT,
    GROUPS,
    OUTCOMES,
    PERCENTILES,
    WINDOW_DEFAULT,
    WINDOW_MAX,
    WINDOW_MIN,
    MetricsReport,
    user_may_view_metrics,
)
from console.metrics.report import metrics_report

OUTCOME_LABELS = {
    "approve": "Approved",
    "edit": "Edited",
    "reject": "Rejected",
    "respond": "Responded",
    "expired": "Expired",
}
GROUP_LABELS = {"tier": "Risk tier", "tool": "Tool", "agent": "Agent", "reviewer": "Reviewer"}
WINDOW_CHOICES = (1, 7, 30, 90, 365)


class MetricsFilterForm(forms.Form):
    window = forms.IntegerField(
        label="Window (days)", min_value=WINDOW_MIN, max_value=WINDOW_MAX, initial=WINDOW_DEFAULT
    )
    group = forms.ChoiceField(
        label="Group by", choices=[(g, GROUP_LABELS[g]) for g in GROUPS], initial=GROUP_DEFAULT
    )


def _filter_form(request: HttpRequest) -> MetricsFilterForm:
    return MetricsFilterForm(
        {
            "window": request.GET.get("window", WINDOW_DEFAULT),
            "group": request.GET.get("group", GROUP_DEFAULT),
        }
    )


def _require_manager(request: HttpRequest) -> None:
    if not user_may_view_metrics(request.user):
        raise PermissionDenied("Only managers and admins may see the metrics.")


def _charts(report: MetricsReport) -> dict[str, Any]:
    series = [charts.Series(key, OUTCOME_LABELS[key]) for key in OUTCOMES]
    days = report.decisions_per_day
    return {
        "per_day": charts.stacked_bars_svg(
            chart_id="chart-decisions",
            title="Decisions per day, by outcome",
            description=(
                f"{sum(d.total for d in days)} closed approvals over {len(days)} days, "
                "stacked as approved, edited, rejected, responded and expired."
            ),
            labels=[f"{d.date:%b} {d.date.day}" for d in days],
            series=series,
            values=[d.counts for d in days],
            unit="decisions",
            width=1100,
        ),
        "time_to_decision": charts.bars_svg(
            chart_id="chart-time",
            title="Time to decision",
            description="How long people took to decide the window's approvals: "
            + ", ".join(f"{b.label}: {b.count}" for b in report.time_to_decision),
            labels=[b.label for b in report.time_to_decision],
            values=[b.count for b in report.time_to_decision],
            css_class="s-time",
            unit="decisions",
            width=540,
        ),
        "queue_age": charts.bars_svg(
            chart_id="chart-queue",
            title="Queue age now",
            description="Pending approvals by age: "
            + ", ".join(f"{b.label}: {b.count}" for b in report.queue_age),
            labels=[b.label for b in report.queue_age],
            values=[b.count for b in report.queue_age],
            css_class="s-queue",
            unit="pending",
            width=540,
        ),
    }


@login_required
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    _require_manager(request)
    form = _filter_form(request)
    if not form.is_valid():
        return render(request, "console/metrics.html", {"form": form}, status=400)
    window, group = form.cleaned_data["window"], form.cleaned_data["group"]
    report = metrics_report(window_days=window, group=group)
    context = {
        "form": form,
        "report": report,
        "charts": _charts(report),
        "query": f"window={window}&group={group}",
        "group_label": GROUP_LABELS[group],
        "outcomes": [(key, OUTCOME_LABELS[key]) for key in OUTCOMES],
        "percentiles": PERCENTILES,
        "window_choices": WINDOW_CHOICES,
        "dead_runs": report.runs_by_status.get("dead", 0),
        "stuck": ops_stuck_open(),
        "canary_catch_rate": settings.AUTONOMY_CANARY_FATIGUE_CATCH_RATE,
        "canary_min_seen": settings.AUTONOMY_CANARY_MIN_SEEN,
    }
    return render(request, "console/metrics.html", context)


@login_required
@require_GET
def metrics_export_csv(request: HttpRequest) -> HttpResponse:
    _require_manager(request)
    form = _filter_form(request)
    if not form.is_valid():
        errors = "; ".join(f"{name}: {' '.join(e)}" for name, e in form.errors.items())
        return HttpResponse(
            f"Invalid input: {errors}\n", status=400, content_type="text/plain; charset=utf-8"
        )
    window, group = form.cleaned_data["window"], form.cleaned_data["group"]
    report = metrics_report(window_days=window, group=group)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="metrics-{group}-{window}d.csv"'
    writer = csv.writer(response)
    writer.writerows(report_csv_rows(report))
    return response
