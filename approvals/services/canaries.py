"""Canaries (docs/autonomy.md): plant a test proposal, close it with its approval, plant
per plan at its rate from the minute sweep.

A canary's run and approval are made by the same services and leave the same events as a real
run's (run.created, run.started, approval.requested, run.waiting), so a reviewer cannot tell it
from a real one before deciding. What marks it a canary (the Canary row, the "canary.planted"
and "canary.closed" events) names no run or approval in the event's own run/approval columns,
so no run or approval page lists it; compliance reads it in the audit log.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from approvals import canary_templates
from approvals.models import AgentRun, ApprovalRequest, Canary, CanaryPlan
from approvals.permissions import user_may_approve_tier
from approvals.services import runs
from approvals.services.requests import approval_requests_sync
from audit.services import event_record
from core.errors import ApplicationError

SERVICE_USERNAME = "agent-requests"
ACTOR = "system:canary"
_PLACEHOLDER = "00000000-canary-thread"


class CanaryRefused(ApplicationError):
    """A canary that cannot be planted (its requester could decide it, an unknown template)."""


def canary_requester(*, plan: CanaryPlan) -> Any:
    """The plan's requester, else the service account runs appear to come from."""
    if plan.requested_as_id:
        return plan.requested_as
    user, created = get_user_model().objects.get_or_create(username=SERVICE_USERNAME)
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def requester_problem(*, user: Any, tier: str) -> str:
    """Why ``user`` may not appear to request canaries of ``tier`` (four eyes), or ""."""
    if user.is_superuser:
        return f"{user} is a superuser and could decide its own canaries"
    allowed, _ = user_may_approve_tier(user=user, tier=tier, escalated=True)
    if allowed:
        return f"{user} may decide {tier} approvals: a canary's requester is never a reviewer"
    return ""


def canary_plant(
    *, plan: CanaryPlan, template: str | None = None, now: dt.datetime | None = None, rng=None
) -> Canary:
    """Plant one canary of ``plan`` (``template``: one of the plan's, else a random one)."""
    rng = rng or random.Random()
    tier = plan.tier.name
    names = canary_templates.templates_for(names=list(plan.templates or []), tier=tier)
    if template is None:
        if not names:
            raise CanaryRefused("the plan names no known template")
        template = rng.choice(names)
    spec = canary_templates.template_get(template)
    requester = canary_requester(plan=plan)
    problem = requester_problem(user=requester, tier=tier)
    if problem:
        raise CanaryRefused(problem)
    call = spec.build(rng)
    built = canary_templates.canary_request(call=call, thread_id=_PLACEHOLDER, tier=tier)
    item = dict(built["item"])
    with transaction.atomic():
        run = runs.run_create(
            agent=call.agent,
            graph_version=built["graph_version"],
            input=call.input,
            requested_by=requester,
            enqueue=False,
        )
        payload = dict(item["payload"])
        if isinstance(payload.get("run_url"), str):
            payload["run_url"] = payload["run_url"].replace(_PLACEHOLDER, run.thread_id)
        item["payload"] = payload
        event_record(action="run.started", actor=f"agent:{run.pk}", run_id=run.pk, data={})
        (approval,) = approval_requests_sync(run=run, requests=[item], waiting=True)
        canary = Canary.objects.create(
            approval=approval, run=run, plan=plan, template=template, would_have=call.would_have
        )
        if now is not None:  # the sweep's clock: its spacing reads planted_at
            Canary.objects.filter(pk=canary.pk).update(planted_at=now)
            canary.planted_at = now
        event_record(
            action="canary.planted",
            actor=ACTOR,
            data={
                "canary": canary.pk,
                "plan": plan.pk,
                "template": template,
                "tier": tier,
                "run": str(run.pk),
                "approval": approval.pk,
                "requested_as": requester.get_username(),
            },
        )
    return canary


def canary_outcome_for(status: str) -> str:
    """Rejected or answered with a message: caught (it did not run). Approved or edited:
    missed. Expired (whatever the default): expired, not counted."""
    if status in (ApprovalRequest.Status.REJECTED, ApprovalRequest.Status.RESPONDED):
        return Canary.Outcome.CAUGHT
    if status in (ApprovalRequest.Status.APPROVED, ApprovalRequest.Status.EDITED):
        return Canary.Outcome.MISSED
    return Canary.Outcome.EXPIRED


def canary_exists() -> Exists:
    """Annotate an approval read with whether it is a canary's (``is_canary``): its close then
    needs no query of its own."""
    return Exists(Canary.objects.filter(approval_id=OuterRef("pk")))


def canary_close(
    *,
    approval: ApprovalRequest,
    status: str,
    decided_by: Any,
    now: dt.datetime,
    expired: bool = False,
) -> Canary | None:
    """In the decision's transaction: the canary's outcome, and its run completed without
    anything invoked. None when ``approval`` is not a canary's (one query, none when the
    approval was read with ``canary_exists()`` and is not one)."""
    if getattr(approval, "is_canary", None) is False:
        return None
    canary = Canary.objects.filter(approval_id=approval.pk, outcome="").first()
    if canary is None:
        return None
    canary.outcome = Canary.Outcome.EXPIRED if expired else canary_outcome_for(status)
    canary.decided_by = decided_by
    canary.decision = status
    canary.decided_at = now
    Canary.objects.filter(pk=canary.pk, outcome="").update(
        outcome=canary.outcome, decided_by=decided_by, decision=status, decided_at=now
    )
    _run_close(canary)
    event_record(
        action="canary.closed",
        actor=ACTOR,
        data={
            "canary": canary.pk,
            "template": canary.template,
            "run": str(canary.run_id),
            "approval": approval.pk,
            "decision": status,
            "outcome": canary.outcome,
            "decided_by": decided_by.get_username() if decided_by is not None else "",
        },
    )
    return canary


def canaries_close_expired(*, approvals: list[ApprovalRequest], now: dt.datetime) -> set[int]:
    """The sweep's expiries that were canaries (closed as expired): their approval ids."""
    ids = set(
        Canary.objects.filter(approval_id__in=[a.pk for a in approvals], outcome="").values_list(
            "approval_id", flat=True
        )
    )
    for approval in approvals:
        if approval.pk in ids:
            canary_close(
                approval=approval, status=approval.status, decided_by=None, now=now, expired=True
            )
    return ids


def _run_close(canary: Canary) -> None:
    """Its run ends here (completed); no graph resumes for it. Nothing on the run says it was a
    canary (other reviewers see the run: only the decider is told, and compliance's
    "canary.closed" event names it)."""
    run = AgentRun(pk=canary.run_id)
    try:
        runs.run_move(run=run, status=AgentRun.Status.COMPLETED, output={})
    except runs.RunStopped:
        return  # cancelled or ended already: nothing to close
    event_record(action="run.completed", actor=f"agent:{run.pk}", run_id=run.pk, data={})


def canary_told(*, canary: Canary, now: dt.datetime | None = None) -> None:
    """The decider saw that it was a test (first time only)."""
    if canary.told_at is None:
        canary.told_at = now or timezone.now()
        Canary.objects.filter(pk=canary.pk, told_at__isnull=True).update(told_at=canary.told_at)


def canaries_plant_due(*, now: dt.datetime | None = None, rng=None) -> int:
    """Each active plan plants one canary when its last is older than 86400/per_day seconds."""
    now = now or timezone.now()
    planted = 0
    for plan in CanaryPlan.objects.filter(is_active=True).select_related("tier", "requested_as"):
        last = plan.canaries.order_by("-planted_at").values_list("planted_at", flat=True).first()
        spacing = dt.timedelta(seconds=86400 / max(plan.per_day, 1))
        if last is not None and now - last < spacing:
            continue
        try:
            canary_plant(plan=plan, now=now, rng=rng)
        except CanaryRefused:
            continue  # the admin form refuses such a plan; one edited around it plants nothing
        planted += 1
    return planted
