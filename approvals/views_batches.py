"""Batch pages: the reader's batches, one batch's items with their diffs, and one decision for
the selected items (approvals/batch_selectors.py, approvals/services/batches.py)."""

from __future__ import annotations

import math
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from approvals.batch_selectors import batch_get, batch_list
from approvals.forms import MessageForm
from approvals.services.batches import ItemResult, approval_batch_decide
from core.errors import ApplicationError
from core.throttles import DecideThrottle

# What each item's result says on the page, by its outcome (else by its status).
RESULT_TEXT = {
    "approved": "Approved",
    "rejected": "Rejected",
    "voted": "Waiting for more approvers",
    "hash_mismatch": "Stale: changed since you loaded it, open it alone",
    "already_decided": "Not decided by you: decided meanwhile",
    "already_voted": "Not counted: you already voted on it",
    "expired": "Not decided: it expired",
    "forbidden": "Forbidden: not yours to decide",
    "changes": "Not decided: what it rests on changed, open it alone",
}


@require_GET
@login_required
def batch_list_view(request: HttpRequest) -> HttpResponse:
    return render(request, "approvals/batches.html", {"batches": batch_list(user=request.user)})


@require_GET
@login_required
def batch_detail(request: HttpRequest, agent: str, tool: str, tier: str) -> HttpResponse:
    _no_nul(agent, tool, tier)
    return _batch_page(request, agent=agent, tool=tool, tier=tier)


def _no_nul(*parts: str) -> None:
    """No name holds a NUL (the database would refuse the comparison): no such batch."""
    if any("\x00" in part for part in parts):
        raise Http404("No such batch.")


@require_POST
@login_required
def batch_decide_view(request: HttpRequest, agent: str, tool: str, tier: str) -> HttpResponse:
    """Decide the selected items (each posted as "<id>:<payload hash seen>"), then the batch
    page again with each item's result above what is left of the batch."""
    _no_nul(agent, tool, tier)
    key = {"agent": agent, "tool": tool, "tier": tier}
    throttle = DecideThrottle()  # the same count as the decision API's
    if not throttle.allow_request(request, None):
        seconds = max(1, math.ceil(throttle.wait() or 1))
        error = f"Too many decisions in a short time. Try again in {seconds} seconds."
        response = _batch_page(request, **key, error=error, status=429)
        response["Retry-After"] = str(seconds)
        return response
    message_form = MessageForm(request.POST)
    if not message_form.is_valid():
        error = f"Message: {message_form.errors['message'][0]}"
        return _batch_page(request, **key, error=error, status=400)
    items = _posted_items(request.POST.getlist("item"))
    if items is None:
        return _batch_page(request, **key, error="A selected item is malformed.", status=400)
    if not items:
        return _batch_page(request, **key, error="Select at least one approval.", status=400)
    try:
        results = approval_batch_decide(
            user=request.user,
            decision=request.POST.get("decision", ""),
            items=items,
            message=message_form.cleaned_data["message"],
            request=request,
            **key,
        )
    except ApplicationError as exc:
        return _batch_page(request, **key, error=exc.message, status=exc.status_code)
    return _batch_page(request, **key, results=results)


def _posted_items(values: list[str]) -> list[tuple[int, str]] | None:
    items = []
    for value in values:
        pk, _, seen_hash = value.partition(":")
        if not (pk.isascii() and pk.isdigit()) or not seen_hash or not 0 < int(pk) < 2**63:
            return None
        items.append((int(pk), seen_hash))
    return items


def _batch_page(
    request: HttpRequest,
    *,
    agent: str,
    tool: str,
    tier: str,
    error: str = "",
    results: list[ItemResult] | None = None,
    status: int = 200,
) -> HttpResponse:
    batch = batch_get(user=request.user, agent=agent, tool=tool, tier=tier)
    context: dict[str, Any] = {
        "batch": batch,
        "error": error,
        "results": [_result_row(result) for result in results or []],
        "message": request.POST.get("message", "") if error else "",
    }
    return render(request, "approvals/batch.html", context, status=status)


def _result_row(result: ItemResult) -> dict[str, Any]:
    text = RESULT_TEXT.get(result.outcome, "Not decided")
    if result.outcome == "voted":
        text = f"{text} ({result.received} of {result.required})"
    kind = "ok" if result.status == 200 and result.outcome != "voted" else "pending"
    return {"result": result, "text": text, "kind": kind if result.status == 200 else "danger"}
