"""Deciding from a signed e-mail link: the confirmation page (GET decides nothing) and its
decision (POST with CSRF, from that page). The service is approvals/services/links.py."""

from __future__ import annotations

import math
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from approvals.forms import MessageForm
from approvals.models import DecisionLink
from approvals.services.errors import ChangesNotAcknowledged
from approvals.services.links import (
    LINK_DECISIONS,
    LinkRefused,
    decision_link_decide,
    decision_link_open,
)
from approvals.views import DECIDED_VERBS, _detail_context
from core.errors import ApplicationError
from core.throttles import DecideThrottle

PAGE = "approvals/decision_link.html"
REFUSED = "approvals/decision_link_refused.html"


class _Throttled(LinkRefused):
    status_code = 429
    reason = "throttled"


def _refused(request: HttpRequest, exc: LinkRefused) -> HttpResponse:
    """Why the link decides nothing, and a pointer to the approval's page (where the normal
    visibility rules apply); nothing of the approval itself."""
    context = {"reason": exc.reason, "error": exc.message, "approval_id": exc.approval_id}
    return render(request, REFUSED, context, status=exc.status_code)


def _page(
    request: HttpRequest, link: DecisionLink, token: str, *, status: int = 200, **extra: Any
) -> HttpResponse:
    """The approval's detail (the approval page's own context and partials) with the link's
    Approve / Reject."""
    context = _detail_context(request, link.approval, **extra)
    context.update(
        token=token,
        link=link,
        link_decisions=[d for d in LINK_DECISIONS if d in context["allowed"]],
    )
    response = render(request, PAGE, context, status=status)
    # The token is in the address: never sent to another site (same-origin keeps the CSRF
    # check working, which "no-referrer" would fail: the browser sends "Origin: null").
    response["Referrer-Policy"] = "same-origin"
    return response


@require_GET
@never_cache
@login_required
def decision_link(request: HttpRequest, token: str) -> HttpResponse:
    """The confirmation page: shows the approval to the link's recipient; decides nothing."""
    try:
        link = decision_link_open(token=token, user=request.user)
    except LinkRefused as exc:
        return _refused(request, exc)
    return _page(request, link, token)


@require_POST
@never_cache
@login_required
def decision_link_decide_view(request: HttpRequest, token: str) -> HttpResponse:
    throttle = DecideThrottle()  # the same count as the approval page's and the API's
    if not throttle.allow_request(request, None):
        seconds = max(1, math.ceil(throttle.wait() or 1))
        exc = _Throttled(f"Too many decisions in a short time. Try again in {seconds} seconds.")
        response = _refused(request, exc)
        response["Retry-After"] = str(seconds)
        return response
    decision = request.POST.get("decision", "")
    form = MessageForm(request.POST)
    message = form.cleaned_data["message"] if form.is_valid() else ""
    try:
        if not form.is_valid():
            link = decision_link_open(token=token, user=request.user)
            error = form.errors["message"][0]
            return _page(request, link, token, status=400, error=error, active=decision)
        decided = decision_link_decide(
            token=token,
            user=request.user,
            decision=decision,
            message=message,
            changes_seen=request.POST.get("changes_seen") or None,
            request=request,
        )
    except LinkRefused as exc:
        return _refused(request, exc)
    except ApplicationError as exc:  # approval_decide's refusal: the link stays usable
        try:
            link = decision_link_open(token=token, user=request.user)
        except LinkRefused as now:  # e.g. decided by someone else meanwhile
            return _refused(request, now)
        common = {"error": exc.message, "active": decision, "message": message}
        if isinstance(exc, ChangesNotAcknowledged):
            common["changes_refused"] = True
        return _page(request, link, token, status=exc.status_code, **common)
    if decided.is_pending:
        messages.success(request, f"Your vote on {decided.tool} (approval #{decided.pk}) counts.")
    else:
        verb = DECIDED_VERBS.get(decided.status, decided.status)
        messages.success(request, f"You {verb} {decided.tool} (approval #{decided.pk}).")
    return redirect("approvals:detail", pk=decided.pk)
