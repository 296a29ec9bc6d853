"""The approval page's claim card: claim, release, assign and unassign (POST only).

With htmx the card is swapped in place (templates/approvals/_claim.html), a refusal shown in
it; without JavaScript the form posts here and the answer is the approval page again, with the
outcome as a message. Each view parses, calls one service (approvals/services/claims.py).
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from django.views.decorators.vary import vary_on_headers

from approvals import services
from approvals.models import ApprovalRequest
from approvals.selectors import approval_get
from core.errors import ApplicationError


def _visible_approval(request: HttpRequest, pk: int) -> ApprovalRequest:
    try:
        return approval_get(pk=pk, fetched_by=request.user)
    except ApprovalRequest.DoesNotExist:
        raise Http404("No such approval.") from None


def _answer(request: HttpRequest, pk: int, act: Callable[[ApprovalRequest], str]) -> HttpResponse:
    """Run ``act`` (a service call returning what to say) and answer with the card or page."""
    approval = _visible_approval(request, pk)
    error, status = "", 200
    try:
        done = act(approval)
    except ApplicationError as refused:
        error, status = refused.message, refused.status_code
    if request.htmx:
        # htmx swaps only 2xx answers: the refusal is shown in the card itself (its status is
        # in a header for scripts and tests).
        fresh = _visible_approval(request, pk)
        response = render(
            request, "approvals/_claim.html", {"approval": fresh, "claim_error": error}
        )
        response["X-Claim-Status"] = str(status)
        return response
    if error:
        messages.error(request, error)
    else:
        messages.success(request, done)
    return redirect("approvals:detail", pk=pk)


@require_POST
@login_required
@vary_on_headers("HX-Request")
def approval_claim_view(request: HttpRequest, pk: int) -> HttpResponse:
    def act(approval: ApprovalRequest) -> str:
        claim = services.approval_claim(approval=approval, user=request.user, request=request)
        if claim.is_assignment:
            return "This approval is assigned to you."
        return "You claimed this approval: others see you are looking at it."

    return _answer(request, pk, act)


@require_POST
@login_required
@vary_on_headers("HX-Request")
def approval_release_view(request: HttpRequest, pk: int) -> HttpResponse:
    def act(approval: ApprovalRequest) -> str:
        services.approval_claim_release(approval=approval, user=request.user, request=request)
        return "You released this approval."

    return _answer(request, pk, act)


@require_POST
@login_required
@vary_on_headers("HX-Request")
def approval_assign_view(request: HttpRequest, pk: int) -> HttpResponse:
    def act(approval: ApprovalRequest) -> str:
        claim = services.approval_assign(
            approval=approval,
            username=request.POST.get("user", ""),
            by=request.user,
            request=request,
        )
        return f"Assigned to {claim.user.get_username()}."

    return _answer(request, pk, act)


@require_POST
@login_required
@vary_on_headers("HX-Request")
def approval_unassign_view(request: HttpRequest, pk: int) -> HttpResponse:
    def act(approval: ApprovalRequest) -> str:
        services.approval_unassign(approval=approval, by=request.user, request=request)
        return "The assignment was taken back."

    return _answer(request, pk, act)
