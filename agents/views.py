"""Run pages: list, start, detail with its timeline, cancel, and time travel."""

from __future__ import annotations

import json
import logging
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from agents import selectors, services
from agents.forms import RunAgentForm, RunFilterForm, RunInputForm, RunStartForm
from agents.models import (
    SandboxDeploy,
    SandboxInventoryMovement,
    SandboxNotification,
    SandboxPayment,
    SandboxTicket,
    Settlement,
)
from agents.runtime.at_rest import CheckpointKeyMissing, CheckpointUnreadable
from agents.runtime.registry import AgentSpec, agent_list
from approvals.models import AgentRun
from approvals.permissions import user_may_cancel
from approvals.run_errors import error_summary
from approvals.selectors import run_approvals, run_get, run_list
from audit.models import AuditEvent
from audit.selectors import event_filter
from core.errors import ApplicationError
from core.pagination import keyset_page
from core.sealing import is_erased

log = logging.getLogger(__name__)

TIME_TRAVEL_PERMISSION = "agents.time_travel"
SANDBOX_SYSTEMS: tuple[tuple[str, type], ...] = (
    ("Tickets", SandboxTicket),
    ("Deploys", SandboxDeploy),
    ("Payments", SandboxPayment),
    ("Inventory", SandboxInventoryMovement),
    ("Notifications", SandboxNotification),
)


def _visible_run(request: HttpRequest, pk: Any) -> AgentRun:
    try:
        return run_get(pk=pk, fetched_by=request.user)
    except AgentRun.DoesNotExist:
        raise Http404("No such run.") from None


def _reads_tracebacks(request: HttpRequest) -> bool:
    return bool(request.user.is_superuser or request.user.is_staff)


def _time_travel_allowed(request: HttpRequest) -> bool:
    return request.user.has_perm(TIME_TRAVEL_PERMISSION)


def _sandbox_rows(run: AgentRun) -> list[dict[str, Any]]:
    """Rows the sandbox systems hold for this run (their idempotency keys start with the thread)."""
    rows: list[dict[str, Any]] = []
    for system, model in SANDBOX_SYSTEMS:
        for row in model.objects.filter(idempotency_key__startswith=f"{run.thread_id}:"):
            rows.append({"system": system, "row": row, "key": row.idempotency_key})
    return rows


@require_GET
@login_required
@vary_on_headers("HX-Request")
def run_list_view(request: HttpRequest) -> HttpResponse:
    form = RunFilterForm(request.GET or None)
    runs = run_list(fetched_by=request.user, **form.filters())
    page = keyset_page(
        runs, cursor=request.GET.get("cursor"), fields=("created_at", "id"), descending=True
    )
    context = {"form": form, "page": page, "runs": page.items}
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "agents/run_list.html#run-table", context)
    return render(request, "agents/run_list.html", context)


def _spec_named(specs: list[AgentSpec], name: str | None) -> AgentSpec | None:
    return next((s for s in specs if s.name == name), None)


def _json_form(spec: AgentSpec | None) -> RunStartForm:
    """The JSON box, prefilled with the agent's example input."""
    if spec is None:
        return RunStartForm()
    return RunStartForm(
        initial={"agent": spec.name, "input": json.dumps(spec.example_input, indent=2)}
    )


def _input_form(spec: AgentSpec | None, data: Any = None) -> RunInputForm | None:
    """The inputs generated from the agent's input schema (None: it declares none)."""
    schema = spec.input_schema() if spec is not None else None
    if schema is None:
        return None
    return RunInputForm(data, schema=schema, example=spec.example_input)


@require_http_methods(["GET", "POST"])
@login_required
@vary_on_headers("HX-Request")
def run_new(request: HttpRequest) -> HttpResponse:
    """Choose an agent (``?agent=``; htmx swaps its inputs in), fill its inputs or its JSON
    box, start. A POST carrying ``input`` is the JSON box; any other, the generated inputs."""
    specs = agent_list()
    if request.method == "GET":
        spec = _spec_named(specs, request.GET.get("agent")) or (specs[0] if specs else None)
        context = _start_context(specs, spec, _input_form(spec), _json_form(spec))
        if request.htmx and not request.htmx.history_restore_request:
            return render(request, "agents/run_new.html#run-start", context)
        return render(request, "agents/run_new.html", context)
    spec = _spec_named(specs, request.POST.get("agent"))
    generated = None if "input" in request.POST else _input_form(spec, request.POST)
    form: RunStartForm | RunInputForm
    if generated is not None:
        form, input_form, json_form = generated, generated, _json_form(spec)
    else:
        form = json_form = RunStartForm(request.POST)
        input_form = _input_form(spec)
    if form.is_valid():
        value = generated.input_value() if generated is not None else form.cleaned_data["input"]
        try:
            run = services.run_start(
                agent=request.POST.get("agent", ""), input=value, user=request.user, request=request
            )
        except services.RunStartError as exc:
            form.add_start_errors(exc.errors or {"": exc.message})
        else:
            messages.success(request, f"Started a {run.agent} run.")
            return redirect("agents:run", pk=run.pk)
    context = _start_context(specs, spec, input_form, json_form, json_open=generated is None)
    context["form"] = form  # the one submitted, with its errors
    return render(request, "agents/run_new.html", context, status=400)


def _start_context(
    specs: list[AgentSpec],
    spec: AgentSpec | None,
    input_form: RunInputForm | None,
    json_form: RunStartForm,
    *,
    json_open: bool = False,
) -> dict[str, Any]:
    chooser = RunAgentForm(initial={"agent": spec.name} if spec else {})
    return {
        "specs": specs,
        "spec": spec,
        "chooser": chooser,
        "input_form": input_form,
        "json_form": json_form,
        "json_open": json_open,
    }


@require_GET
@login_required
def run_detail(request: HttpRequest, pk: Any) -> HttpResponse:
    run = _visible_run(request, pk)
    history: list[dict[str, Any]] = []
    history_error = ""
    try:
        history = selectors.run_history(run=run)
    except Exception as exc:  # the page must still show the run when its history cannot load
        log.exception("history of run %s could not be read", run.pk)
        history_error = f"The step history could not be read ({type(exc).__name__})."
    effects = list(run.effects.select_related("approval").order_by("created_at", "id"))
    sandbox = _sandbox_rows(run)
    sandbox_keys = {item["key"] for item in sandbox}
    context = {
        "run": run,
        # The traceback (file paths, code) is for admins; everyone else reads one line.
        "run_error": run.error if _reads_tracebacks(request) else error_summary(run.error),
        "history": history,
        "history_error": history_error,
        "approvals": run_approvals(run=run),
        "effects": [
            {"effect": e, "sandbox": e.key in sandbox_keys, "erased": _effect_erased(e)}
            for e in effects
        ],
        "sandbox": sandbox,
        "autonomous": selectors.run_autonomous_actions(run=run, effects=effects),
        "events": event_filter(AuditEvent.objects.all(), filters={"run": run.pk}).order_by("seq"),
        "may_cancel": not run.is_terminal and user_may_cancel(user=request.user, run=run),
        "may_settle": request.user.is_superuser or request.user.has_perm("approvals.decide"),
        "settlements": Settlement.choices,
        "time_travel": _time_travel_allowed(request),
        "retention_notice": _retention_notice(run),
    }
    return render(request, "agents/run_detail.html", context)


def _effect_erased(effect: Any) -> bool:
    """Its run's data key was destroyed: args, result and error read as erased."""
    return any(is_erased(v) for v in (effect.args, effect.result, effect.error))


def _retention_notice(run: AgentRun) -> str:
    pruned = selectors.run_pruned(run=run)
    return selectors.retention_notice(pruned) if pruned is not None else ""


@require_POST
@login_required
def run_cancel_view(request: HttpRequest, pk: Any) -> HttpResponse:
    run = _visible_run(request, pk)
    if not user_may_cancel(user=request.user, run=run):
        raise PermissionDenied("You may not cancel this run.")
    if run.is_terminal:
        messages.info(request, f"This run is already {run.status}; nothing to cancel.")
    else:
        services.run_cancel(run=run, user=request.user, request=request)
        messages.success(
            request, "Run cancelled. Effects it already applied are being compensated."
        )
    return redirect("agents:run", pk=run.pk)


# Checked before LookupError: a missing key is a KeyMissingError (a LookupError), and must not
# read as "no such step"; a key id naming another key must not be a server error.
SEALED_UNREADABLE = (CheckpointKeyMissing, CheckpointUnreadable)


def _sealed_unreadable(request: HttpRequest, run: AgentRun, exc: Exception) -> HttpResponse:
    """Back to the run page, saying why its state cannot be read (the operator's runbook)."""
    log.warning("state of run %s cannot be read: %s", run.pk, exc)
    messages.error(request, f"The state of this run cannot be read: {exc}")
    return redirect("agents:run", pk=run.pk)


@require_GET
@login_required
def run_step(request: HttpRequest, pk: Any, checkpoint_id: str) -> HttpResponse:
    """The whole state at one checkpoint (time travel; audited)."""
    if not _time_travel_allowed(request):
        raise PermissionDenied("Time travel needs its own permission.")
    run = _visible_run(request, pk)
    try:
        step = selectors.run_state_at(run=run, checkpoint_id=checkpoint_id)
    except (selectors.CheckpointPruned, selectors.CheckpointErased) as pruned:
        # Gone on purpose, not a wrong address: say so (410) instead of a bare 404.
        context = {"run": run, "checkpoint_id": checkpoint_id, "notice": str(pruned)}
        return render(request, "agents/run_step_pruned.html", context, status=410)
    except SEALED_UNREADABLE as exc:
        return _sealed_unreadable(request, run, exc)
    except LookupError:
        raise Http404("No such step in this run.") from None
    services.run_state_view_audit(
        run=run, checkpoint_id=checkpoint_id, user=request.user, request=request
    )
    return render(request, "agents/run_step.html", {"run": run, "step": step})


@require_POST
@login_required
def run_fork_view(request: HttpRequest, pk: Any) -> HttpResponse:
    """Re-run from a step as a new branch (a new run; audited)."""
    if not _time_travel_allowed(request):
        raise PermissionDenied("Time travel needs its own permission.")
    run = _visible_run(request, pk)
    checkpoint_id = request.POST.get("checkpoint_id", "")
    try:
        child = services.run_fork(
            run=run, checkpoint_id=checkpoint_id, user=request.user, request=request
        )
    except SEALED_UNREADABLE as exc:
        return _sealed_unreadable(request, run, exc)
    except LookupError:
        raise Http404("No such step in this run.") from None
    except services.ForkRefused as refused:
        messages.error(request, refused.message)
        return redirect("agents:run", pk=run.pk)
    messages.success(request, f"Forked a new run from step {checkpoint_id[:12]}.")
    return redirect("agents:run", pk=child.pk)


@require_POST
@login_required
def effect_settle_view(request: HttpRequest, pk: Any, effect_id: int) -> HttpResponse:
    """A person's answer for an effect in doubt (it happened / it did not / call it again)."""
    run = _visible_run(request, pk)
    effect = run.effects.filter(pk=effect_id).first()
    if effect is None:
        raise Http404("No such effect in this run.")
    try:
        services.effect_settle(
            effect=effect,
            outcome=request.POST.get("outcome", ""),
            user=request.user,
            note=request.POST.get("note", "")[:500],
            request=request,
        )
    except ApplicationError as refused:
        messages.error(request, refused.message)
    else:
        messages.success(request, f"Settled {effect.tool}; the run goes on.")
    return redirect("agents:run", pk=run.pk)
