"""Review after the fact (docs/autonomy.md): the queue of actions that ran without waiting for
a person, one action's page, and its review (fine, or undo)."""

from __future__ import annotations

import math
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from approvals import services
from approvals.autonomy_models import AutonomousAction, AutonomyRule
from approvals.autonomy_selectors import (
    REVIEW_VIEWS,
    autonomous_action_counts,
    autonomous_action_get,
    autonomous_action_list,
    autonomous_action_queue,
    count_label,
    reader_scope,
)
from approvals.contract import is_console_payload, payload_on_deny
from approvals.forms import _tier_names
from approvals.permissions import user_may_review_action
from approvals.services.autonomy_review import NOTE_MAX
from core.errors import ApplicationError
from core.pagination import keyset_page
from core.sealing import is_erased
from core.throttles import DecideThrottle

Review = AutonomousAction.Review
VIEW_LABELS = {
    "pending": "Waiting for your review",
    "fine": "Marked fine",
    "undone": "Undone or undoing",
    "all": "All reviewed after the fact",
}


class AfterFilterForm(forms.Form):
    """Filters of the review-after-the-fact queue; invalid values mean "no filter"."""

    view = forms.ChoiceField(label="Show", required=False, choices=list(VIEW_LABELS.items()))
    tool = forms.CharField(label="Tool", required=False, max_length=100)
    tier = forms.ChoiceField(label="Tier", required=False)

    def __init__(self, *args: Any, counts: dict[str, int] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        counts = counts or {}
        self.fields["view"].choices = [
            (view, f"{label} ({count_label(counts[view])})" if view in counts else label)
            for view, label in VIEW_LABELS.items()
        ]
        self.fields["tier"].choices = [("", "Any tier")] + [(t, t) for t in _tier_names()]

    def filters(self) -> dict[str, Any]:
        data = self.cleaned_data if self.is_valid() else {}
        return {
            "view": data.get("view") or "pending",
            "tool": (data.get("tool") or "").strip() or None,
            "tier": data.get("tier") or None,
        }


def _visible_action(request: HttpRequest, action_id: int) -> AutonomousAction:
    try:
        return autonomous_action_get(pk=action_id, fetched_by=request.user)
    except AutonomousAction.DoesNotExist:
        raise Http404("No such action.") from None


@require_GET
@login_required
@vary_on_headers("HX-Request")
def after_queue(request: HttpRequest) -> HttpResponse:
    scope = reader_scope(request.user)  # the reader's tiers, read once for the page
    counts = autonomous_action_counts(user=request.user, scope=scope)
    form = AfterFilterForm(request.GET or None, counts=counts)
    filters = form.filters()
    view = filters.pop("view")
    if view == "pending":
        qs = autonomous_action_queue(user=request.user, scope=scope, **filters)
    else:
        qs = autonomous_action_list(
            fetched_by=request.user, review=REVIEW_VIEWS[view], scope=scope, **filters
        )
    page = keyset_page(qs, cursor=request.GET.get("cursor"), fields=("created_at", "id"))
    context = {
        "form": form,
        "page": page,
        "actions": page.items,
        "view": view,
        "heading": VIEW_LABELS[view],
        "pending_label": count_label(counts["pending"]),
    }
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "approvals/after_queue.html#after-table", context)
    return render(request, "approvals/after_queue.html", context)


def why_it_ran(action: AutonomousAction) -> dict[str, Any]:
    """Why the action ran without waiting and why it is in the queue, as the page says it:
    the rule (or that it was deleted since), the mode, and the sample's arithmetic."""
    threshold = action.sample_percent * 100
    return {
        "rule": action.rule,
        "post_hoc": action.mode == AutonomyRule.Mode.POST_HOC,
        "sampled": action.review != Review.NOT_SAMPLED,
        "threshold": threshold,
        "below": action.draw < threshold,
    }


def _detail_context(
    request: HttpRequest, action: AutonomousAction, *, error: str = "", conflict: Any = None
) -> dict[str, Any]:
    payload = action.payload if isinstance(action.payload, dict) else {"value": action.payload}
    erased = is_erased(action.args) or is_erased(action.payload)
    structured = not erased and is_console_payload(payload)
    may_review, reason = user_may_review_action(user=request.user, tier=action.tier, run=action.run)
    evidence = payload.get("evidence") if structured else None
    return {
        "action": action,
        "run": action.run,
        "payload": payload,
        "structured": structured,
        "erased": erased,
        "evidence": evidence if isinstance(evidence, list) else ([evidence] if evidence else []),
        "on_deny": "" if erased else payload_on_deny(payload),
        "why": why_it_ran(action),
        "pending": action.review == Review.PENDING,
        "may_review": may_review and action.review == Review.PENDING,
        "not_allowed_reason": reason,
        "note_max": NOTE_MAX,
        "error": error,
        "conflict": conflict,
    }


@require_GET
@login_required
@vary_on_headers("HX-Request")
def after_detail(request: HttpRequest, action_id: int) -> HttpResponse:
    action = _visible_action(request, action_id)
    context = _detail_context(request, action)
    if request.htmx and request.GET.get("part") == "status":
        return render(request, "approvals/after_detail.html#action-review", context)
    return render(request, "approvals/after_detail.html", context)


@require_POST
@login_required
def after_review(request: HttpRequest, action_id: int) -> HttpResponse:
    action = _visible_action(request, action_id)
    throttle = DecideThrottle()  # the same count as decisions: a review is one
    if not throttle.allow_request(request, None):
        seconds = max(1, math.ceil(throttle.wait() or 1))
        error = f"Too many reviews in a short time. Try again in {seconds} seconds."
        response = render(
            request, "approvals/after_detail.html", _detail_context(request, action, error=error)
        )
        response.status_code = 429
        response["Retry-After"] = str(seconds)
        return response
    verdict = request.POST.get("verdict", "")
    note = request.POST.get("note", "").replace("\r\n", "\n")
    try:
        reviewed = services.autonomous_action_review(
            action=action, user=request.user, verdict=verdict, note=note, request=request
        )
    except ApplicationError as exc:
        fresh = _visible_action(request, action_id)
        conflict = exc if isinstance(exc, services.ReviewConflict) else None
        context = _detail_context(request, fresh, error=exc.message, conflict=conflict)
        return render(request, "approvals/after_detail.html", context, status=exc.status_code)
    if reviewed.review == Review.UNDOING:
        messages.success(
            request, f"Undoing {reviewed.tool} (action #{reviewed.pk}): its compensation runs now."
        )
        return redirect("approvals:after-detail", action_id=reviewed.pk)
    messages.success(request, f"You marked {reviewed.tool} (action #{reviewed.pk}) fine.")
    return redirect("approvals:after-queue")
