"""Reviewer pages: the approval queue and the approval detail with its decision panel."""

from __future__ import annotations

import math
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from approvals import policy, services
from approvals.batch_selectors import batch_offered
from approvals.canary_selectors import canary_told_for
from approvals.claim_selectors import claims_attach
from approvals.contract import is_console_payload
from approvals.decision_context import decision_context, outcome_context
from approvals.forms import ArgsEditForm, MessageForm, QueueFilterForm
from approvals.models import ApprovalRequest
from approvals.permissions import user_may_decide
from approvals.selectors import approval_get, approval_list_pending, approval_quorum
from approvals.services.canaries import canary_told
from core.errors import ApplicationError
from core.pagination import keyset_page
from core.sealing import is_erased
from core.throttles import DecideThrottle

DECIDED_VERBS = {
    ApprovalRequest.Status.APPROVED: "approved",
    ApprovalRequest.Status.EDITED: "edited and approved",
    ApprovalRequest.Status.REJECTED: "rejected",
    ApprovalRequest.Status.RESPONDED: "responded to",
    ApprovalRequest.Status.EXPIRED: "closed",
}


def _visible_approval(request: HttpRequest, pk: int) -> ApprovalRequest:
    try:
        return approval_get(pk=pk, fetched_by=request.user)
    except ApprovalRequest.DoesNotExist:
        raise Http404("No such approval.") from None


# --- queue ---------------------------------------------------------------------------------


@require_GET
@login_required
@vary_on_headers("HX-Request")
def queue(request: HttpRequest) -> HttpResponse:
    form = QueueFilterForm(request.GET or None)
    filters = form.filters()
    # "All pending" is every pending approval the reader may see (the selector applies the
    # visibility rule), so the choice is offered to everyone.
    qs = approval_list_pending(user=request.user, **filters)
    page = keyset_page(qs, cursor=request.GET.get("cursor"), fields=("expires_at", "id"))
    context = {
        "form": form,
        "page": page,
        "approvals": claims_attach(page.items),  # each row's claim: one query for the page
        "mine": filters["mine"],
        "assigned": filters["assigned"],
        "may_decide": request.user.has_perm("approvals.decide"),
    }
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "approvals/queue.html#queue-table", context)
    context["batches"] = batch_offered(user=request.user)  # offers "Decide together"
    return render(request, "approvals/queue.html", context)


# --- detail and decisions ----------------------------------------------------------------------


def _edit_form(approval: ApprovalRequest, data: Any = None) -> ArgsEditForm:
    payload = approval.payload if isinstance(approval.payload, dict) else {}
    schema = payload.get("args_schema") if isinstance(payload.get("args_schema"), dict) else {}
    if data is not None:
        data = _line_breaks_normalized(data)
    return ArgsEditForm(data, schema=schema, proposed=approval.args or {})


def _line_breaks_normalized(data: QueryDict) -> QueryDict:
    """A form post submits a textarea's line breaks as CRLF, htmx's preview sends LF: use LF
    (as the proposals do), so an untouched multi-line value is no edit and the preview's hash
    matches the confirmation's."""
    normalized = data.copy()
    for key, values in data.lists():
        normalized.setlist(key, [v.replace("\r\n", "\n") for v in values])
    return normalized


def _allowed(approval: ApprovalRequest, structured: bool) -> list[str]:
    allowed = list(approval.allowed_decisions or ApprovalRequest.Decision.values)
    if not structured:
        # A payload the console does not understand can only be answered in words.
        allowed = [d for d in allowed if d == ApprovalRequest.Decision.RESPOND] or ["respond"]
    return [d for d in ApprovalRequest.Decision.values if d in allowed]


def _detail_context(
    request: HttpRequest,
    approval: ApprovalRequest,
    *,
    edit_form: ArgsEditForm | None = None,
    preview: dict[str, Any] | None = None,
    errors: dict[str, str] | None = None,
    error: str = "",
    conflict: services.DecisionConflict | None = None,
    active: str = "",
    seen_hash: str | None = None,
    message: str = "",
    changes_refused: bool = False,
) -> dict[str, Any]:
    payload = (
        approval.payload if isinstance(approval.payload, dict) else {"value": approval.payload}
    )
    erased = is_erased(approval.args) or is_erased(approval.payload)
    structured = not erased and is_console_payload(payload)
    may_decide, reason = user_may_decide(user=request.user, approval=approval)
    allowed = _allowed(approval, structured)
    evidence = payload.get("evidence")
    return {
        "approval": approval,
        "run": approval.run,
        "payload": payload,
        "structured": structured,
        "erased": erased,
        "evidence": evidence if isinstance(evidence, list) else ([evidence] if evidence else []),
        "may_decide": may_decide and approval.is_pending,
        "not_allowed_reason": reason,
        "allowed": allowed,
        "edit_form": edit_form
        or (_edit_form(approval) if "edit" in allowed and structured else None),
        "preview": preview,
        "errors": errors or {},
        "error": error,
        "conflict": conflict,
        "decided_verb": DECIDED_VERBS.get(approval.status, approval.status),
        "active": active,
        "seen_hash": seen_hash or approval.payload_hash,
        "message": message,
        "quorum": approval_quorum(approval=approval),
        # if denied, if nobody decides, what changed while it waited (and a refusal for it)
        **decision_context(approval=approval),
        "changes_refused": changes_refused,
        "reject_reasons": ApprovalRequest.RejectReason.choices,
        **outcome_context(approval),
        # After the final decision only: a planted test proposal says so to who decided it.
        "canary_told": _canary_told(approval, request.user),
    }


def _canary_told(approval: ApprovalRequest, user: Any) -> dict[str, Any] | None:
    told = canary_told_for(approval=approval, user=user)
    if told and told["decided"]:
        canary_told(canary=told["canary"])
    return told


def _decision_refused(
    request: HttpRequest,
    approval: ApprovalRequest,
    exc: ApplicationError,
    *,
    edit_form: ArgsEditForm | None,
    **common: Any,
) -> HttpResponse:
    """The approval page again, saying why the decision was not recorded (the error's status).

    Args errors go next to their fields of the edit form; a conflict shows the approval as it
    is now; an edit not yet confirmed shows its diff to confirm (200: the next step).
    """
    if isinstance(exc, services.PreviewRequired):
        context = _detail_context(
            request,
            approval,
            edit_form=edit_form,
            preview=exc.preview,
            error=exc.message if exc.stale else "",
            **common,
        )
        return render(request, "approvals/detail.html", context)
    if isinstance(exc, services.ChangesNotAcknowledged):
        # The page again with the changes to confirm, the input kept (an edit with its diff).
        preview = None
        if edit_form is not None and edit_form.is_valid():
            preview = services.approval_edit_preview(approval=approval, args=edit_form.args())
        context = _detail_context(
            request,
            approval,
            edit_form=edit_form,
            preview=preview,
            error=exc.message,
            changes_refused=True,
            **common,
        )
    elif isinstance(exc, services.DecisionConflict):
        fresh = approval_get(pk=approval.pk, fetched_by=request.user)
        context = _detail_context(request, fresh, conflict=exc, error=exc.message, **common)
    elif isinstance(exc, services.DecisionInvalid):
        errors = dict(exc.errors)
        if edit_form is not None:
            # ArgsInvalid: every problem belongs to the form (its own message is redundant).
            names = errors if isinstance(exc, services.ArgsInvalid) else _args_keys(errors)
            edit_form.add_schema_errors({key: errors.pop(key) for key in list(names)})
        error = "" if isinstance(exc, services.ArgsInvalid) else exc.message
        context = _detail_context(
            request, approval, edit_form=edit_form, errors=errors, error=error, **common
        )
    else:
        context = _detail_context(request, approval, error=exc.message, **common)
    return render(request, "approvals/detail.html", context, status=exc.status_code)


def _decision_throttled(
    request: HttpRequest, approval: ApprovalRequest, *, wait: float | None
) -> HttpResponse:
    """The approval page again, 429: too many decisions in a row, and when to try again."""
    seconds = max(1, math.ceil(wait or 1))
    error = f"Too many decisions in a short time. Try again in {seconds} seconds."
    context = _detail_context(request, approval, error=error)
    response = render(request, "approvals/detail.html", context, status=429)
    response["Retry-After"] = str(seconds)
    return response


def _args_keys(errors: dict[str, str]) -> list[str]:
    return [key for key in errors if key.startswith("args.")]


@require_GET
@login_required
@vary_on_headers("HX-Request")
def approval_detail(request: HttpRequest, pk: int) -> HttpResponse:
    approval = _visible_approval(request, pk)
    # The page asks about the tier many times (quorum, deadlines, changes, the claim card):
    # one reading of the policy answers them all. Decisions are checked afresh by the service.
    with policy.policy_read_once():
        context = _detail_context(request, approval)
        if request.htmx and request.GET.get("part") == "status":
            return render(request, "approvals/detail.html#approval-status", context)
        return render(request, "approvals/detail.html", context)


@require_POST
@login_required
@vary_on_headers("HX-Request")
def approval_edit_preview(request: HttpRequest, pk: int) -> HttpResponse:
    """The edit form again, with inline errors or the diff of edited vs proposed args."""
    approval = _visible_approval(request, pk)
    form = _edit_form(approval, data=request.POST)
    preview = None
    if form.is_valid():
        try:
            preview = services.approval_edit_preview(approval=approval, args=form.args())
        except services.ArgsInvalid as exc:
            form.add_schema_errors(exc.errors)
    context = _detail_context(
        request,
        approval,
        edit_form=form,
        preview=preview,
        active="edit",
        seen_hash=request.POST.get("seen_hash", ""),
        message=request.POST.get("message", ""),
    )
    if request.htmx:
        return render(request, "approvals/detail.html#edit-form", context)
    return render(request, "approvals/detail.html", context)


@require_POST
@login_required
def approval_decide_view(request: HttpRequest, pk: int) -> HttpResponse:
    approval = _visible_approval(request, pk)
    throttle = DecideThrottle()  # the same count as the decision API's
    if not throttle.allow_request(request, None):
        return _decision_throttled(request, approval, wait=throttle.wait())
    decision = request.POST.get("decision", "")
    seen_hash = request.POST.get("seen_hash", "")
    message_form = MessageForm(request.POST)
    message = message_form.cleaned_data["message"] if message_form.is_valid() else ""
    common = {"active": decision, "seen_hash": seen_hash, "message": message}
    if not message_form.is_valid():
        context = _detail_context(
            request, approval, errors={"message": message_form.errors["message"][0]}, **common
        )
        return render(request, "approvals/detail.html", context, status=400)

    args = None
    form = None
    previewed = None
    if decision == ApprovalRequest.Decision.EDIT:
        form = _edit_form(approval, data=request.POST)
        if not form.is_valid():
            context = _detail_context(request, approval, edit_form=form, **common)
            return render(request, "approvals/detail.html", context, status=400)
        args = form.args()
        if request.POST.get("confirmed") == "1":
            previewed = request.POST.get("previewed", "")

    try:
        decided = services.approval_decide(
            approval=approval,
            user=request.user,
            decision=decision,
            seen_hash=seen_hash,
            args=args,
            message=message,
            request=request,
            previewed_hash=previewed,
            require_preview=True,
            changes_seen=request.POST.get("changes_seen") or None,
            reason=request.POST.get("reason", "") if decision == "reject" else "",
        )
    except ApplicationError as exc:
        return _decision_refused(request, approval, exc, edit_form=form, **common)

    if decided.is_pending:  # a vote toward a quorum of several people
        quorum = approval_quorum(approval=decided)
        messages.success(
            request,
            f"Your vote on {decided.tool} (approval #{decided.pk}) counts: "
            f"{quorum['received']} of {quorum['required']} approvals.",
        )
        return redirect("approvals:queue")
    verb = DECIDED_VERBS.get(decided.status, decided.status)
    messages.success(request, f"You {verb} {decided.tool} (approval #{decided.pk}).")
    told = _canary_told(decided, request.user)
    if told:
        messages.warning(
            request,
            f"Approval #{decided.pk} was a test proposal planted by compliance "
            f"({told['title']}). {told['line']}",
        )
    return redirect("approvals:queue")
