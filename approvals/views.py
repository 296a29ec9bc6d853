"""Reviewer pages: the approval queue and the approval detail with its decision panel."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from approvals.diff import args_diff
from approvals.forms import ArgsEditForm, MessageForm, QueueFilterForm
from approvals.models import AgentRun, ApprovalRequest
from approvals.permissions import user_may_decide
from approvals.schema import args_errors
from approvals.selectors import approval_get, approval_list_pending, approval_quorum
from approvals.services import (
    DecisionConflict,
    DecisionForbidden,
    DecisionInvalid,
    approval_decide,
)
from audit.canonical import payload_hash

PAGE_SIZE = 25
STRUCTURED_PAYLOAD = "console.approval"
DECIDED_VERBS = {
    ApprovalRequest.Status.APPROVED: "approved",
    ApprovalRequest.Status.EDITED: "edited and approved",
    ApprovalRequest.Status.REJECTED: "rejected",
    ApprovalRequest.Status.RESPONDED: "responded to",
    ApprovalRequest.Status.EXPIRED: "closed",
}


# --- shared helpers (the run pages use them too) ------------------------------------------


def user_may_view_all(user: Any) -> bool:
    """Reviewers and auditors see every run and approval; others see their own runs."""
    return bool(
        user.is_superuser
        or user.has_perm("approvals.decide")
        or user.has_perm("approvals.view_approvalrequest")
    )


def user_may_view_run(*, user: Any, run: AgentRun) -> bool:
    return run.requested_by_id == user.pk or user_may_view_all(user)


@dataclass(frozen=True)
class Page:
    items: list[Any]
    next_cursor: str | None
    is_first: bool


def cursor_encode(values: list[Any]) -> str:
    raw = json.dumps([v.isoformat() if hasattr(v, "isoformat") else str(v) for v in values])
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def cursor_decode(cursor: str, *, size: int) -> list[str] | None:
    """The values of an opaque cursor, or None when it is not one of ours."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        values = json.loads(raw)
    except (binascii.Error, ValueError):
        return None
    if (
        not isinstance(values, list)
        or len(values) != size
        or not all(isinstance(v, str) for v in values)
    ):
        return None
    if parse_datetime(values[0]) is None:
        return None
    return values


def keyset_page(
    qs: QuerySet,
    *,
    cursor: str | None,
    fields: tuple[str, str],
    descending: bool = False,
    size: int = PAGE_SIZE,
) -> Page:
    """One page after ``cursor`` on (datetime field, id): no OFFSET and no COUNT(*)."""
    first, second = fields
    op = "lt" if descending else "gt"
    values = cursor_decode(cursor, size=2) if cursor else None
    if values:
        when = parse_datetime(values[0])
        try:
            qs = qs.filter(
                Q(**{f"{first}__{op}": when}) | Q(**{first: when, f"{second}__{op}": values[1]})
            )
        except (ValueError, TypeError, ValidationError):
            values = None  # a cursor we did not write: start at the first page
    prefix = "-" if descending else ""
    rows = list(qs.order_by(f"{prefix}{first}", f"{prefix}{second}")[: size + 1])
    has_more = len(rows) > size
    rows = rows[:size]
    next_cursor = (
        cursor_encode([getattr(rows[-1], first), getattr(rows[-1], second)]) if has_more else None
    )
    return Page(items=rows, next_cursor=next_cursor, is_first=not values)


def _visible_approval(request: HttpRequest, pk: int) -> ApprovalRequest:
    try:
        approval = approval_get(approval_id=pk)
    except ApprovalRequest.DoesNotExist:
        raise Http404("No such approval.") from None
    if not user_may_view_run(user=request.user, run=approval.run):
        raise Http404("No such approval.")
    return approval


# --- queue ---------------------------------------------------------------------------------


@require_GET
@login_required
@vary_on_headers("HX-Request")
def queue(request: HttpRequest) -> HttpResponse:
    form = QueueFilterForm(request.GET or None)
    filters = form.filters()
    may_view_all = user_may_view_all(request.user)
    if not may_view_all:
        filters["mine"] = True
    qs = approval_list_pending(user=request.user, **filters)
    page = keyset_page(qs, cursor=request.GET.get("cursor"), fields=("expires_at", "id"))
    context = {
        "form": form,
        "page": page,
        "approvals": page.items,
        "mine": filters["mine"],
        "may_view_all": may_view_all,
        "may_decide": request.user.has_perm("approvals.decide"),
    }
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "approvals/queue.html#queue-table", context)
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


def _edit_preview(approval: ApprovalRequest, form: ArgsEditForm) -> dict[str, Any] | None:
    """Validate the edit the way the decision service will, and diff it against the proposal."""
    if not form.is_valid():
        return None
    edited = form.args()
    payload = approval.payload if isinstance(approval.payload, dict) else {}
    errors = args_errors(schema=payload.get("args_schema"), args=edited)
    if errors:
        form.add_schema_errors(errors)
        return None
    return {
        "args": edited,
        "diff": args_diff(approval.args or {}, edited),
        "hash": payload_hash(edited),
    }


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
    conflict: DecisionConflict | None = None,
    active: str = "",
    seen_hash: str | None = None,
    message: str = "",
) -> dict[str, Any]:
    payload = (
        approval.payload if isinstance(approval.payload, dict) else {"value": approval.payload}
    )
    structured = payload.get("type") == STRUCTURED_PAYLOAD
    may_decide, reason = user_may_decide(user=request.user, approval=approval)
    allowed = _allowed(approval, structured)
    evidence = payload.get("evidence")
    return {
        "approval": approval,
        "run": approval.run,
        "payload": payload,
        "structured": structured,
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
    }


@require_GET
@login_required
@vary_on_headers("HX-Request")
def approval_detail(request: HttpRequest, pk: int) -> HttpResponse:
    approval = _visible_approval(request, pk)
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
    preview = _edit_preview(approval, form)
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
    if decision == ApprovalRequest.Decision.EDIT:
        form = _edit_form(approval, data=request.POST)
        preview = _edit_preview(approval, form)
        if preview is None:
            context = _detail_context(request, approval, edit_form=form, **common)
            return render(request, "approvals/detail.html", context, status=400)
        confirmed = request.POST.get("confirmed") == "1"
        if not confirmed or request.POST.get("previewed") != preview["hash"]:
            # Nobody confirms an edit without seeing the diff of exactly these values first.
            context = _detail_context(
                request,
                approval,
                edit_form=form,
                preview=preview,
                **common,
                error="The values changed after your preview: check the differences again."
                if confirmed
                else "",
            )
            return render(request, "approvals/detail.html", context)
        args = preview["args"]

    try:
        decided = approval_decide(
            approval=approval,
            user=request.user,
            decision=decision,
            seen_hash=seen_hash,
            args=args,
            message=message,
            request=request,
        )
    except DecisionInvalid as exc:
        if form is not None:
            form.add_schema_errors({k: v for k, v in exc.errors.items() if k.startswith("args.")})
        other = {k: v for k, v in exc.errors.items() if not k.startswith("args.")}
        context = _detail_context(
            request, approval, edit_form=form, errors=other, error=exc.message, **common
        )
        return render(request, "approvals/detail.html", context, status=400)
    except DecisionForbidden as exc:
        context = _detail_context(request, approval, error=exc.message, **common)
        return render(request, "approvals/detail.html", context, status=403)
    except DecisionConflict as exc:
        fresh = approval_get(approval_id=approval.pk)
        context = _detail_context(request, fresh, conflict=exc, error=exc.message, **common)
        return render(request, "approvals/detail.html", context, status=409)

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
    return redirect("approvals:queue")
