"""Opening approval requests for a run's pending interrupt actions, with their due times."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals import policy
from approvals.changes import changes_baseline
from approvals.models import AgentRun, ApprovalRequest, Notification, RiskTier
from approvals.notifications import notifications_create
from approvals.services import runs
from approvals.services.shadow import shadow_verdicts_record
from audit.canonical import canonical_hash
from audit.services import event_record


def approval_requests_sync(
    *, run: AgentRun, requests: list[dict[str, Any]], waiting: bool = False
) -> list[ApprovalRequest]:
    """One ApprovalRequest per pending interrupt action; creates only what is missing.

    Each item: interrupt_id, action_index, tool, args, payload, tier, allowed_decisions,
    expires_at (datetime). Unique (run, interrupt_id, action_index) makes a repeated advance
    create nothing twice. With ``waiting``, the run also moves to waiting (the worker's
    transition, fenced like the others: RunStopped for a cancelled or finished run) in the same
    transaction, its "run.waiting" event after the requests' own.
    """
    created: list[ApprovalRequest] = []
    with transaction.atomic():
        if waiting:
            # The conditional UPDATE takes the row lock that the check below would take.
            runs.run_move(run=run, status=AgentRun.Status.WAITING)
        else:
            locked = (
                AgentRun.objects.select_for_update()
                .only("status", "cancel_requested")
                .get(pk=run.pk)
            )
            if locked.cancel_requested or locked.is_terminal:
                return created  # nothing new to decide on a cancelled or finished run
        existing = set(run.approvals.values_list("interrupt_id", "action_index"))
        version = policy.policy_version_current()
        baselines: dict = {}  # one reading per agent, tool and tier
        for item in requests:
            if (item["interrupt_id"], item["action_index"]) in existing:
                continue
            tier = policy.tier_get(item["tier"])
            approval = ApprovalRequest(
                run=run,
                interrupt_id=item["interrupt_id"],
                action_index=item["action_index"],
                tool=item["tool"],
                args=item["args"],
                payload=item["payload"],
                payload_hash=canonical_hash(item["payload"]),
                tier=item["tier"],
                allowed_decisions=item["allowed_decisions"],
                expires_at=item["expires_at"],
                policy_version=version,
                **due_times(tier=tier, expires_at=item["expires_at"]),
                **changes_baseline(run=run, tool=item["tool"], tier=item["tier"], memo=baselines),
            )
            # No savepoint: every request of a run is created here, under the run's row lock
            # (taken above), after reading the existing ones, so no other advance can insert
            # the same (run, interrupt, action) meanwhile. Should the unique constraint still
            # refuse one, the whole transaction rolls back and the advance is retried.
            approval.save(force_insert=True)
            event_record(
                action="approval.requested",
                actor=f"agent:{run.id}",
                run_id=run.id,
                approval_id=approval.id,
                tool=approval.tool,
                data={
                    "interrupt_id": approval.interrupt_id,
                    "action_index": approval.action_index,
                    "tier": approval.tier,
                    "policy_version": version,
                    "payload_hash": approval.payload_hash,
                    "expires_at": approval.expires_at.isoformat(),
                },
                private={"payload": approval.payload},
            )
            recheck = item["payload"].get("recheck") if isinstance(item["payload"], dict) else None
            if isinstance(recheck, dict):
                # The gate found the final args in a higher tier than the decided approval.
                event_record(
                    action="approval.rechecked",
                    actor=f"agent:{run.id}",
                    run_id=run.id,
                    approval_id=approval.id,
                    tool=approval.tool,
                    data={**recheck, "to_tier": approval.tier, "new_approval_id": approval.id},
                )
            notifications_create(approval=approval, event=Notification.Event.REQUEST, tier=tier)
            created.append(approval)
        shadow_verdicts_record(approvals=created)  # what a shadow rule would have done
        if waiting:
            event_record(action="run.waiting", actor=f"agent:{run.pk}", run_id=run.pk, data={})
    return created


def due_times(*, tier: RiskTier | None, expires_at: dt.datetime) -> dict[str, Any]:
    """When the sweep should remind and escalate a new approval of this tier (None: never)."""
    now = timezone.now()
    due: dict[str, Any] = {"remind_at": None, "escalate_at": None}
    if tier is None:
        return due
    if tier.remind_before_seconds:
        remind_at = expires_at - dt.timedelta(seconds=tier.remind_before_seconds)
        due["remind_at"] = max(remind_at, now)
    if tier.escalate_after_seconds and tier.escalation_group_id:
        escalate_at = now + dt.timedelta(seconds=tier.escalate_after_seconds)
        due["escalate_at"] = escalate_at if escalate_at < expires_at else None
    return due
