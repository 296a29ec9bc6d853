"""Stuck runs and queues: found by the every-minute sweep task, escalated once, cleared later.

Three kinds (``StuckItem.Kind``):

- an orphaned interrupt: a run waiting, not flagged, not woken, its lease free, with no
  pending approval for ``STUCK_RUN_GRACE_SECONDS`` (its interrupt has nobody to answer it);
- a run past its deadline: still "running" ``STUCK_RUN_GRACE_SECONDS`` after its lease's
  expiry (``lease_expires_at``, the deadline its worker's heartbeat keeps pushing ahead; a
  worker never writes past it), so no worker took it over although recovery re-enqueues
  lapsed leases every minute;
- a queue too old: a tier whose oldest pending approval is older than the tier's
  ``stuck_after_seconds`` (one read of the partial index ``approval_pending_tier_age``).

- an outcome not reported: an external agent's action approved (or edited) more than
  ``REMOTE_OUTCOME_DEADLINE_SECONDS`` ago whose outcome never came (agents/remote/; key: the
  approval's id); it clears when the outcome arrives, or when the agent is told "cancelled"
  instead of the decision (its run cancelled before the advance: nothing to report), and is
  never raised once an Agent Server connector delivered the decision (the graph goes on there
  with no way to report: ``stuck_outcome_exempt_provider_set``).

External agents' runs (``external:*``) run in their own services: never orphaned or past a
lease deadline here.

Each is raised once: one open StuckItem per (kind, key) (a partial unique constraint, so two
sweeps at once raise it once), written with its audit event and its notifications (the outbox)
in one transaction. An open item whose condition no longer holds is cleared (audited); if it
gets stuck again later, that is a new item and a new notification.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from approvals.contract import EXTERNAL_AGENT_PREFIX
from approvals.models import AgentRun, ApprovalRequest, Notification, RiskTier, StuckItem
from approvals.notifications import notifications_deliver_enqueue
from approvals.services.outcomes import outcome_told_expression
from audit.services import event_record

STUCK_ACTOR = "system:sweep"
Kind = StuckItem.Kind
# What one stuck thing is: its run (or None), the tier (queue kind), what to tell people.
Found = dict[tuple[str, str], dict[str, Any]]

# An expression over ApprovalRequest true for approved actions whose agent cannot report an
# outcome (agents.remote: an Agent Server connector delivered the decision). approvals/ never
# imports agents/: the agents app registers it at start-up.
_outcome_exempt: Callable[[], Any] | None = None


def stuck_outcome_exempt_provider_set(provider: Callable[[], Any] | None) -> None:
    """Register the expression factory (agents' AppConfig.ready)."""
    global _outcome_exempt
    _outcome_exempt = provider


def outcome_exempt(approval: ApprovalRequest) -> bool:
    """Whether this approval's agent has no way to report an outcome (one indexed read)."""
    if _outcome_exempt is None:
        return False
    return ApprovalRequest.objects.filter(pk=approval.pk).filter(_outcome_exempt()).exists()


def stuck_orphaned_runs(*, now: dt.datetime) -> QuerySet[AgentRun]:
    """Waiting runs with no pending approval that nothing will move (see the module doc)."""
    grace = now - dt.timedelta(seconds=settings.STUCK_RUN_GRACE_SECONDS)
    pending = ApprovalRequest.objects.filter(
        run=OuterRef("pk"), status=ApprovalRequest.Status.PENDING
    )
    return (
        AgentRun.objects.filter(
            status=AgentRun.Status.WAITING, flag="", wake_requested=False, updated_at__lt=grace
        )
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
        .exclude(Exists(pending))
        .exclude(agent__startswith=EXTERNAL_AGENT_PREFIX)
        .order_by("updated_at")
    )


def stuck_running_runs(*, now: dt.datetime) -> QuerySet[AgentRun]:
    """Running runs whose lease lapsed ``STUCK_RUN_GRACE_SECONDS`` ago (index run_status_lease)."""
    grace = now - dt.timedelta(seconds=settings.STUCK_RUN_GRACE_SECONDS)
    return AgentRun.objects.filter(
        status=AgentRun.Status.RUNNING, lease_expires_at__lt=grace
    ).exclude(agent__startswith=EXTERNAL_AGENT_PREFIX)


def stuck_outcomes_unreported(*, now: dt.datetime) -> QuerySet[ApprovalRequest]:
    """External agents' approved (or edited) actions with no outcome reported in time, counted
    from when the agent was told the decision (never for one it was not told: its request
    still waits on another action, or was closed as cancelled)."""
    due = now - dt.timedelta(seconds=settings.REMOTE_OUTCOME_DEADLINE_SECONDS)
    return (
        ApprovalRequest.objects.filter(
            status__in=(ApprovalRequest.Status.APPROVED, ApprovalRequest.Status.EDITED),
            decided_at__lt=due,
            run__agent__startswith=EXTERNAL_AGENT_PREFIX,
            outcome_report__isnull=True,
        )
        .filter(outcome_told_expression(before=due))
        .exclude(_outcome_exempt() if _outcome_exempt is not None else Q(pk__in=[]))
        .select_related("run")
        .only("id", "tool", "tier", "decided_at", "run__id", "run__agent")
        .order_by("decided_at", "id")
    )


def stuck_queue_oldest(*, now: dt.datetime) -> dict[str, tuple[dt.datetime | None, int]]:
    """Each tier with a threshold: (its oldest pending approval's creation or None, threshold)."""
    found: dict[str, tuple[dt.datetime | None, int]] = {}
    for name, threshold in RiskTier.objects.filter(stuck_after_seconds__gt=0).values_list(
        "name", "stuck_after_seconds"
    ):
        oldest = (
            ApprovalRequest.objects.filter(status=ApprovalRequest.Status.PENDING, tier=name)
            .order_by("created_at")
            .values_list("created_at", flat=True)
            .first()
        )
        found[name] = (oldest, threshold)
    return found


def _found(
    *,
    now: dt.datetime,
    runs: list[Any] | None = None,
    queues: bool = True,
    outcomes: list[int] | None = None,
) -> Found:
    """What is stuck now; with ``runs``, only those runs are looked at (any number), else at
    most ``SWEEP_BATCH`` of each run kind (the rest next pass)."""
    found: Found = {}
    for kind, query, what in (
        (Kind.ORPHANED_INTERRUPT, stuck_orphaned_runs(now=now), "waits with no pending approval"),
        (Kind.RUN_PAST_DEADLINE, stuck_running_runs(now=now), "is running past its lease"),
    ):
        query = query.filter(pk__in=runs) if runs is not None else query[: settings.SWEEP_BATCH]
        for run in query.only("id", "agent", "updated_at", "lease_expires_at"):
            since = run.lease_expires_at if kind == Kind.RUN_PAST_DEADLINE else run.updated_at
            detail = f"{run.agent} run {run.pk} {what} since {since:%Y-%m-%d %H:%M:%S} UTC."
            found[(kind, str(run.pk))] = {"run": run, "tier": None, "detail": detail}
    unreported = stuck_outcomes_unreported(now=now)
    if outcomes is not None:
        unreported = unreported.filter(pk__in=outcomes)
    for approval in unreported if outcomes is not None else unreported[: settings.SWEEP_BATCH]:
        detail = (
            f"{approval.run.agent} never reported the outcome of {approval.tool} "
            f"(approval {approval.pk}, decided {approval.decided_at:%Y-%m-%d %H:%M:%S} UTC)."
        )
        found[(Kind.OUTCOME_NOT_REPORTED, str(approval.pk))] = {
            "run": approval.run,
            "tier": None,
            "detail": detail,
            "approval": approval.pk,
        }
    for tier, (oldest, threshold) in (stuck_queue_oldest(now=now) if queues else {}).items():
        if oldest is not None and (now - oldest).total_seconds() > threshold:
            age = int((now - oldest).total_seconds())
            detail = (
                f"The oldest pending approval of tier {tier} waits for {age} s "
                f"(threshold {threshold} s)."
            )
            found[(Kind.QUEUE_TOO_OLD, tier)] = {"run": None, "tier": tier, "detail": detail}
    return found


def stuck_sweep(*, now: dt.datetime | None = None) -> dict[str, int]:
    """Raise what became stuck (once each) and clear what moved again; the counts."""
    now = now or timezone.now()
    open_items = {(i.kind, i.key): i for i in StuckItem.objects.filter(cleared_at__isnull=True)}
    found = _found(now=now)
    raised = sum(
        _raise(kind=kind, key=key, info=info, now=now)
        for (kind, key), info in found.items()
        if (kind, key) not in open_items
    )
    # An open run item beyond this pass's bound is still stuck: look at those runs themselves.
    run_kinds = (Kind.ORPHANED_INTERRUPT, Kind.RUN_PAST_DEADLINE)
    open_runs = [key for (kind, key) in open_items if kind in run_kinds]
    open_outcomes = [int(key) for (kind, key) in open_items if kind == Kind.OUTCOME_NOT_REPORTED]
    still = set(found)
    if open_runs or open_outcomes:
        still |= set(_found(now=now, runs=open_runs, queues=False, outcomes=open_outcomes or []))
    cleared = sum(_clear(item, now=now) for pair, item in open_items.items() if pair not in still)
    return {"stuck_raised": raised, "stuck_cleared": cleared}


def _raise(*, kind: str, key: str, info: dict[str, Any], now: dt.datetime) -> bool:
    """One open item, its audit event and its notifications; False if another sweep won."""
    run = info["run"]
    try:
        with transaction.atomic():
            StuckItem.objects.create(
                kind=kind, key=key, run=run, detail=info["detail"][:500], raised_at=now
            )
            event_record(
                action="stuck.raised",
                actor=STUCK_ACTOR,
                run_id=run.pk if run is not None else None,
                data={"kind": kind, "key": key, "tier": info["tier"], "detail": info["detail"]},
            )
            _notify(kind=kind, key=key, info=info, now=now)
    except IntegrityError:
        return False  # the same (kind, key) is open already: raised once, by the other sweep
    return True


def _clear(item: StuckItem, *, now: dt.datetime) -> bool:
    with transaction.atomic():
        if not StuckItem.objects.filter(pk=item.pk, cleared_at__isnull=True).update(cleared_at=now):
            return False
        event_record(
            action="stuck.cleared",
            actor=STUCK_ACTOR,
            run_id=item.run_id,
            data={"kind": item.kind, "key": item.key, "raised_at": item.raised_at.isoformat()},
        )
    return True


def _recipients(tier: RiskTier | None) -> list[str]:
    """The administrators (staff) and, for a tier's queue, its escalation group."""
    who = Q(is_staff=True) | Q(is_superuser=True)
    if tier is not None and tier.escalation_group_id:
        who |= Q(groups=tier.escalation_group_id)
    users = get_user_model().objects.filter(who, is_active=True).exclude(email="")
    return sorted(set(users.values_list("email", flat=True)))


def _notify(*, kind: str, key: str, info: dict[str, Any], now: dt.datetime) -> None:
    """Outbox rows (email to the recipients, the tier's webhook), delivered on commit."""
    tier = RiskTier.objects.filter(name=info["tier"]).first() if info["tier"] else None
    base = settings.CONSOLE_BASE_URL.rstrip("/")
    if info.get("approval") is not None:
        url = f"{base}/approvals/{info['approval']}/"
    else:
        url = f"{base}/runs/{key}/" if info["run"] is not None else f"{base}/metrics/"
    subject = f"Stuck: {StuckItem.Kind(kind).label.lower()} ({key})"[:200]
    text = f"{subject}. {info['detail']}\n<{url}|Open>"
    payload = {"text": text, "event": "stuck", "kind": kind, "key": key, "url": url}
    common = {"event": Notification.Event.STUCK, "subject": subject, "text": text}
    rows = [
        Notification(channel=Notification.Channel.EMAIL, recipient=email, **common)
        for email in _recipients(tier)
    ]
    endpoint = tier.webhook_endpoint if tier is not None else None
    if endpoint is not None and endpoint.is_active:
        rows.append(
            Notification(
                channel=Notification.Channel.WEBHOOK,
                recipient=endpoint.url,
                endpoint=endpoint,
                **common,
            )
        )
    for row in rows:
        row.payload = payload
        row.next_attempt_at = now
    if rows:
        Notification.objects.bulk_create(rows)
        notifications_deliver_enqueue(notification_ids=[row.pk for row in rows])
