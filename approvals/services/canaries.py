"""Canaries (docs/autonomy.md): plant a test proposal, close it with its approval, plant
per plan at its rate from the minute sweep.

A canary's run is a real run of the agent, driven by its own graph up to its approval gate (a
scripted model proposes the template's call: agents/canary.py), so it has the same checkpoints,
steps, tokens, events and approval as a real run paused there; a reviewer cannot tell it from a
real one before deciding. Its requester is one who requests real runs of that agent. What marks it a canary (the Canary row, the "canary.planted"
and "canary.closed" events) names no run or approval in the event's own run/approval columns,
so no run or approval page lists it; compliance reads it in the audit log.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, OuterRef
from django.utils import timezone

from approvals import canary_templates
from approvals.autonomy import autonomy_rule_for, tier_tools
from approvals.autonomy_models import AutonomyRule
from approvals.canary_templates import TEMPLATES
from approvals.models import AgentRun, ApprovalRequest, Canary, CanaryPlan
from approvals.permissions import user_may_approve_tier
from approvals.services import runs
from audit.services import event_record
from core.errors import ApplicationError

ACTOR = "system:canary"
REQUESTER_WINDOW = dt.timedelta(days=30)
_NOT_WAITING = (AutonomyRule.Mode.SAMPLED, AutonomyRule.Mode.POST_HOC)

log = logging.getLogger(__name__)


class CanaryRefused(ApplicationError):
    """A canary that cannot be planted (no requester, no template whose calls wait in the tier,
    an unknown template)."""


def requester_problem(*, user: Any, tier: str) -> str:
    """Why ``user`` may not appear to request canaries of ``tier`` (four eyes), or ""."""
    if user.is_superuser:
        return f"{user} is a superuser and could decide its own canaries"
    allowed, _ = user_may_approve_tier(user=user, tier=tier, escalated=True)
    if allowed:
        return f"{user} may decide {tier} approvals: a canary's requester is never a reviewer"
    return ""


def canary_requester(*, plan: CanaryPlan, agent: str, now: dt.datetime | None = None) -> Any:
    """Who the canary's run appears to come from: the plan's ``requested_as`` when set (its
    problem, if any, refuses the plant), else the user who requested the most real runs of
    ``agent`` in the last 30 days among those who may not decide the plan's tier. CanaryRefused
    when there is none: compliance then sets the plan's "requested as"."""
    tier = plan.tier.name
    if plan.requested_as_id:
        problem = requester_problem(user=plan.requested_as, tier=tier)
        if problem:
            raise CanaryRefused(problem)
        return plan.requested_as
    since = (now or timezone.now()) - REQUESTER_WINDOW
    busiest = (
        AgentRun.objects.filter(agent=agent, created_at__gte=since, requested_by__isnull=False)
        .exclude(Exists(Canary.objects.filter(run_id=OuterRef("pk"))))
        .values("requested_by")
        .annotate(runs=Count("id"))
        .order_by("-runs", "requested_by")
    )
    users = get_user_model().objects.in_bulk([row["requested_by"] for row in busiest[:20]])
    for row in busiest[:20]:
        user = users.get(row["requested_by"])
        if user is not None and user.is_active and not requester_problem(user=user, tier=tier):
            return user
    raise CanaryRefused(
        f"nobody who may not decide {tier} approvals requested a real {agent} run in the last "
        '30 days: set the plan\'s "requested as" (a user or service account that requests '
        "real runs of it)"
    )


def templates_plantable(*, plan: CanaryPlan) -> tuple[list[str], dict[str, str]]:
    """The plan's templates (empty: every template) a real call could wait on in its tier, and
    why each other one is left out: its tool's calls never fall in the tier (the policy:
    ``tier_tools``), or an autonomy rule for the tool or tier lets them run without waiting
    (sampled or post-hoc), so a waiting one would be a canary."""
    names = [n for n in (plan.templates or list(canary_templates.TEMPLATES)) if n in TEMPLATES]
    in_tier = set(tier_tools(plan.tier))
    kept, skipped = [], {}
    for name in names:
        tool = TEMPLATES[name].tool
        rule = autonomy_rule_for(tool=tool, tier=plan.tier.name) if tool in in_tier else None
        if tool not in in_tier:
            skipped[name] = f"{tool} calls never fall in tier {plan.tier.name}"
        elif rule is not None and rule.mode in _NOT_WAITING:
            skipped[name] = f"{tool} calls run without waiting ({rule.get_mode_display()} rule)"
        else:
            kept.append(name)
    return kept, skipped


def plan_problem(*, plan: CanaryPlan) -> str:
    """Why ``plan`` plants nothing now (the report's plan line), or ""."""
    kept, skipped = templates_plantable(plan=plan)
    if not kept:
        why = "; ".join(f"{n}: {w}" for n, w in skipped.items())
        return "plants nothing: " + (why or "it names no known template")
    agents = sorted({TEMPLATES[name].agent for name in kept})
    problems = []
    for agent in agents:
        try:
            canary_requester(plan=plan, agent=agent)
        except CanaryRefused as exc:
            problems.append(str(exc))
    return "plants nothing: " + "; ".join(problems) if len(problems) == len(agents) else ""


def canary_plant(
    *, plan: CanaryPlan, template: str | None = None, now: dt.datetime | None = None, rng=None
) -> Canary:
    """Plant one canary of ``plan`` (``template``: one of the plan's, else a random one): the
    agents app runs the agent's own graph on the template's input up to its gate, and the
    approval it opens becomes the canary's in the same transaction."""
    rng = rng or random.Random()
    tier = plan.tier.name
    names, skipped = templates_plantable(plan=plan)
    if template is None:
        if not names:
            why = "; ".join(f"{n}: {w}" for n, w in skipped.items()) or "no known template"
            raise CanaryRefused(f"the plan has no template to plant in tier {tier}: {why}")
        template = rng.choice(names)
    elif template not in names:
        raise CanaryRefused(
            f"template {template!r} cannot be planted in tier {tier}: "
            + skipped.get(template, "the plan does not name it")
        )
    planter = canary_templates.canary_planter()
    if planter is None:
        raise CanaryRefused("no agents app to run the canary's agent in this install")
    spec = canary_templates.template_get(template)
    call = spec.build(rng)
    requester = canary_requester(plan=plan, agent=call.agent, now=now)
    made: list[Canary] = []

    def on_paused(approvals: list[ApprovalRequest]) -> None:
        (approval,) = approvals
        if approval.tier != tier:
            raise CanaryRefused(f"its call fell in tier {approval.tier}, not in {tier}")
        made.append(_canary_record(approval, plan=plan, template=template, call=call, now=now))

    try:
        planter(
            agent=call.agent,
            input=call.input,
            requested_by=requester,
            tool=call.tool,
            args=call.args,
            on_paused=on_paused,
        )
    except CanaryRefused:
        raise
    except Exception as exc:  # noqa: BLE001 - its run failed and is never advanced again
        log.warning("canary %s of plan %s not planted: %s", template, plan.pk, exc)
        raise CanaryRefused(f"the canary's run did not reach its approval gate: {exc}") from exc
    return made[0]


def _canary_record(
    approval: ApprovalRequest, *, plan: CanaryPlan, template: str, call, now
) -> Canary:
    """The Canary row (and its audit event), in the transaction that opens its approval."""
    canary = Canary.objects.create(
        approval=approval,
        run_id=approval.run_id,
        plan=plan,
        template=template,
        would_have=call.would_have,
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
            "tier": plan.tier.name,
            "run": str(approval.run_id),
            "approval": approval.pk,
            "requested_as": approval.run.requested_by.get_username(),
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
        except CanaryRefused as exc:  # the report's plan line says why too (plan_problem)
            log.warning("canary plan %s planted nothing: %s", plan.pk, exc)
            continue
        planted += 1
    return planted
