"""Compliance pages: the audit log, one event's full record, the export manifest, verify."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from audit.forms import filter_form
from audit.private import event_data_open
from audit.selectors import (
    event_get_visible,
    event_list_page,
    export_list,
    user_may_read,
    user_sees_all,
)
from audit.verify import chain_verify_db

PAGE_SIZE = 50


def _require_reader(request: HttpRequest) -> None:
    if not user_may_read(request.user):
        raise PermissionDenied("You may not read the audit trail.")


def _require_compliance(request: HttpRequest) -> None:
    if not user_sees_all(request.user):
        raise PermissionDenied("Only compliance and admins may do this.")


@login_required
@require_GET
@vary_on_headers("HX-Request")
def audit_log(request: HttpRequest) -> HttpResponse:
    _require_reader(request)
    form = filter_form(request.GET)
    events = []
    older = None
    if form.is_valid():
        before = request.GET.get("before", "")
        # ASCII digits of a value a bigint column holds ("²".isdigit() is True; 20 nines overflow).
        # At most 19 significant digits, or int() itself fails (over 4300 digits: ValueError).
        significant = before.lstrip("0") or "0"
        digits = before.isascii() and before.isdigit() and len(significant) <= 19
        below = int(significant) if digits and int(significant) < 2**63 else None
        events = event_list_page(
            user=request.user,
            filters=form.cleaned_data,
            before=below,
            limit=PAGE_SIZE + 1,
        )
        if len(events) > PAGE_SIZE:
            events = events[:PAGE_SIZE]
            older = events[-1].seq
    query = request.GET.copy()
    query.pop("before", None)
    context = {
        "form": form,
        "events": events,
        "older": older,
        "query": query.urlencode(),
        "filtered": bool(form.is_valid() and form.filters()),
        "may_export": user_sees_all(request.user),
    }
    template = "audit/log.html#audit-table" if request.htmx else "audit/log.html"
    return render(request, template, context)


@login_required
@require_GET
def event_detail(request: HttpRequest, seq: int) -> HttpResponse:
    _require_reader(request)
    event = event_get_visible(user=request.user, seq=seq)
    if event is None:
        raise Http404("No such event, or not yours to see.")
    opened = event_data_open(event)  # sealed keys opened, or "erased"
    data = opened if isinstance(opened, dict) else {"value": opened}
    return render(request, "audit/event.html", {"event": event, "data_items": sorted(data.items())})


@login_required
@require_GET
def export_manifest(request: HttpRequest) -> HttpResponse:
    _require_compliance(request)
    return render(request, "audit/exports.html", {"exports": export_list()[:200]})


@login_required
@require_GET
def chain_verify(request: HttpRequest) -> HttpResponse:
    _require_compliance(request)
    return render(request, "audit/verify.html", {"result": chain_verify_db()})
