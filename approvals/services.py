"""Writes for runs and approvals. Each changes state and records its audit event in one
transaction (invariant 3)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django_q.tasks import async_task

from approvals import policy
from approvals.diff import args_diff
from approvals.models import AgentRun, ApprovalRequest, ApprovalVote, Notification, RiskTier
from approvals.notifications import notifications_create
from approvals.permissions import user_in_group, user_may_approve_tier, user_may_decide
from approvals.schema import args_errors
from audit.canonical import json_has_nul, payload_hash
from audit.services import event_record

RUN_ADVANCE_TASK = "agents.tasks.run_advance"
TIMEOUT_ACTOR = "system:timeout"


class DecisionError(Exception):
    status_code = 400

    def __init__(self, message: str, *, errors: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        self.errors = errors or {}


class DecisionInvalid(DecisionError):
    """Bad input (400); ``errors`` names the fields."""


class DecisionForbidden(DecisionError):
    status_code = 403


class DecisionConflict(DecisionError):
    """Already decided, expired, or the payload hash does not match (409)."""

    status_code = 409

    def __init__(self, message: str, *, reason: str, approval: ApprovalRequest):
        super().__init__(message)
        self.reason = reason
        self.approval = approval


class RunStopped(Exception):
    """The run was cancelled or finished while a worker held it; the worker must stop."""


def run_advance_enqueue(*, run_id: Any) -> None:
    """Queue an advance of the run once the current transaction commits.

    The wake flag is set in the same transaction: a worker holding the run's lease at that
    moment sees it when it releases the lease and queues the run again, so a decision made
    while the run is busy is never lost.
    """
    AgentRun.objects.filter(pk=run_id).update(wake_requested=True)
    transaction.on_commit(lambda: async_task(RUN_ADVANCE_TASK, str(run_id), group="runs"))


# --- runs --------------------------------------------------------------------------------


def run_create(
    *,
    agent: str,
    graph_version: str,
    input: dict[str, Any],
    requested_by: Any,
    request: Any = None,
    parent: AgentRun | None = None,
    forked_from_checkpoint: str = "",
    fork_data: dict[str, Any] | None = None,
) -> AgentRun:
    """A queued run plus its audit event ("run.created", or "run.forked" with a ``parent``);
    the advance is queued on commit."""
    with transaction.atomic():
        run = AgentRun(
            agent=agent,
            graph_version=graph_version,
            input=input,
            requested_by=requested_by,
            parent_run=parent,
            forked_from_checkpoint=forked_from_checkpoint,
        )
        run.thread_id = str(run.id)
        run.save(force_insert=True)
        if parent is None:
            action = "run.created"
            data = {"agent": agent, "graph_version": graph_version, "input": input}
        else:
            action = "run.forked"
            data = {
                "parent_run": str(parent.pk),
                "checkpoint_id": forked_from_checkpoint,
                **(fork_data or {}),
            }
        event_record(action=action, actor=requested_by, run_id=run.id, data=data, request=request)
        run_advance_enqueue(run_id=run.id)
    return run


def _run_transition(
    run: AgentRun, *, status: str, action: str, data: dict[str, Any] | None = None, **fields: Any
) -> AgentRun:
    with transaction.atomic():
        locked = AgentRun.objects.select_for_update().get(pk=run.pk)
        if locked.status != status and (locked.cancel_requested or locked.is_terminal):
            # A cancel (or an end) that landed while a worker ran must not be overwritten.
            raise RunStopped(f"run {locked.pk} is {locked.status}; not moving it to {status}")
        locked.status = status
        for name, value in fields.items():
            setattr(locked, name, value)
        if status in AgentRun.TERMINAL and locked.finished_at is None:
            locked.finished_at = timezone.now()
        locked.save()
        event_record(action=action, actor=f"agent:{locked.id}", run_id=locked.id, data=data or {})
    return locked


def run_mark_running(*, run: AgentRun, resumed: bool) -> AgentRun:
    fields: dict[str, Any] = {}
    if resumed:
        fields["resume_count"] = run.resume_count + 1
    action = "run.resumed" if resumed else "run.started"
    return _run_transition(run, status=AgentRun.Status.RUNNING, action=action, **fields)


def run_mark_waiting(*, run: AgentRun) -> AgentRun:
    if run.status == AgentRun.Status.WAITING:
        return run
    return _run_transition(run, status=AgentRun.Status.WAITING, action="run.waiting")


def run_mark_completed(*, run: AgentRun, output: dict[str, Any]) -> AgentRun:
    return _run_transition(
        run,
        status=AgentRun.Status.COMPLETED,
        action="run.completed",
        data={"output": output},
        output=output,
        lease_owner="",
        lease_expires_at=None,
    )


def run_mark_failed(*, run: AgentRun, error: str, dead: bool) -> AgentRun:
    status = AgentRun.Status.DEAD if dead else AgentRun.Status.FAILED
    return _run_transition(
        run,
        status=status,
        action=f"run.{status}",
        data={"error": error},
        error=error,
        lease_owner="",
        lease_expires_at=None,
    )


def run_record_failure(*, run: AgentRun, error: str, retry_in: float) -> AgentRun:
    """A retryable failure: count it and keep the run queued for another attempt."""
    return _run_transition(
        run,
        status=AgentRun.Status.QUEUED,
        action="run.retrying",
        data={
            "error": error,
            "retry_in_seconds": round(retry_in, 2),
            "failure_count": run.failure_count + 1,
        },
        error=error,
        failure_count=run.failure_count + 1,
        lease_owner="",
        lease_expires_at=None,
    )


def run_flag(*, run: AgentRun, reason: str) -> AgentRun:
    """Refuse to resume and say why (invariant 8); a person must look."""
    return _run_transition(
        run,
        status=run.status,
        action="run.flagged",
        data={"reason": reason},
        flag=reason,
        lease_owner="",
        lease_expires_at=None,
    )


def run_mark_cancelled(*, run: AgentRun, user: Any, request: Any = None) -> AgentRun:
    with transaction.atomic():
        locked = AgentRun.objects.select_for_update().get(pk=run.pk)
        if locked.is_terminal:
            return locked
        locked.cancel_requested = True
        locked.status = AgentRun.Status.CANCELLED
        locked.finished_at = timezone.now()
        locked.save()
        closed = list(
            locked.approvals.filter(status=ApprovalRequest.Status.PENDING).values_list(
                "id", flat=True
            )
        )
        locked.approvals.filter(id__in=closed).update(
            status=ApprovalRequest.Status.EXPIRED,
            decided_at=timezone.now(),
            decided_by_label="system:cancel",
            decision={"decision": "reject", "message": "run cancelled", "by": "system:cancel"},
        )
        event_record(
            action="run.cancelled",
            actor=user,
            run_id=locked.id,
            data={"closed_approvals": closed},
            request=request,
        )
    return locked


def run_budget_add(*, run: AgentRun, steps: int = 0, tokens: int = 0) -> None:
    """Persist spent budget after each step, so a resume never resets it."""
    from django.db.models import F

    AgentRun.objects.filter(pk=run.pk).update(
        steps_used=F("steps_used") + steps, tokens_used=F("tokens_used") + tokens
    )


# --- approvals -----------------------------------------------------------------------------


def approval_requests_sync(
    *, run: AgentRun, requests: list[dict[str, Any]]
) -> list[ApprovalRequest]:
    """One ApprovalRequest per pending interrupt action; creates only what is missing.

    Each item: interrupt_id, action_index, tool, args, payload, tier, allowed_decisions,
    expires_at (datetime). Unique (run, interrupt_id, action_index) makes a repeated advance
    create nothing twice.
    """
    created: list[ApprovalRequest] = []
    with transaction.atomic():
        locked = AgentRun.objects.select_for_update().get(pk=run.pk)
        if locked.cancel_requested or locked.is_terminal:
            return created  # nothing new to decide on a cancelled or finished run
        existing = set(run.approvals.values_list("interrupt_id", "action_index"))
        version = policy.policy_version_current()
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
                payload_hash=payload_hash(item["payload"]),
                tier=item["tier"],
                allowed_decisions=item["allowed_decisions"],
                expires_at=item["expires_at"],
                policy_version=version,
                **_due_times(tier=tier, expires_at=item["expires_at"]),
            )
            try:
                with transaction.atomic():
                    approval.save(force_insert=True)
            except IntegrityError:
                continue  # created by a concurrent advance
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
                    "payload": approval.payload,
                    "payload_hash": approval.payload_hash,
                    "expires_at": approval.expires_at.isoformat(),
                },
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
    return created


def _due_times(*, tier: RiskTier | None, expires_at: dt.datetime) -> dict[str, Any]:
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


def approval_decide(
    *,
    approval: ApprovalRequest,
    user: Any,
    decision: str,
    seen_hash: str,
    args: dict[str, Any] | None = None,
    message: str = "",
    note: str = "",
    request: Any = None,
) -> ApprovalRequest:
    """Vote on an approval; final once the tier's quorum is met (see docs/policy.md).

    Row lock, payload-hash binding, single use (invariant 5). Reject and respond are final at
    once; approve and edit count toward a quorum of distinct people. An edit that is not final
    starts a new round for the edited args (the payload hash changes, earlier votes lapse).
    """
    allowed, reason = user_may_decide(user=user, approval=approval)
    if not allowed:
        raise DecisionForbidden(reason)
    for field, value in (("args", args), ("message", message), ("note", note)):
        if json_has_nul(value):
            raise DecisionInvalid(
                "Text with a NUL character.", errors={field: "must not contain \\u0000"}
            )
    resume_args = _decision_args(approval=approval, decision=decision, args=args, message=message)
    if decision == ApprovalRequest.Decision.EDIT:
        _edit_tier_check(approval=approval, user=user, args=resume_args)
    with transaction.atomic():
        locked = (
            ApprovalRequest.objects.select_for_update()
            .select_related("run", "run__requested_by")
            .get(pk=approval.pk)
        )
        if locked.status != ApprovalRequest.Status.PENDING:
            by = locked.decided_by_label or "someone"
            raise DecisionConflict(
                f"Already {locked.status} by {by}.", reason="already_decided", approval=locked
            )
        if locked.expires_at <= timezone.now():
            raise DecisionConflict("This approval has expired.", reason="expired", approval=locked)
        if seen_hash != locked.payload_hash:
            raise DecisionConflict(
                "The action changed since you loaded it; reload and review it again.",
                reason="hash_mismatch",
                approval=locked,
            )
        votes = list(
            locked.votes.filter(round=locked.quorum_round).select_related("user").order_by("id")
        )
        if any(vote.user_id == user.pk for vote in votes):
            raise DecisionConflict(
                "You already voted on this approval; the quorum needs someone else.",
                reason="already_voted",
                approval=locked,
            )
        tier = policy.tier_get(locked.tier)
        required = max(1, tier.required_approvals) if tier else 1
        final = True
        if decision in (ApprovalRequest.Decision.APPROVE, ApprovalRequest.Decision.EDIT):
            if decision == ApprovalRequest.Decision.EDIT and resume_args != locked.args:
                votes = []  # the edited args are a new proposal: earlier votes do not count
            final = len(votes) + 1 >= required
            if final:
                _required_group_check(tier=tier, voters=[v.user for v in votes] + [user])
            elif decision == ApprovalRequest.Decision.EDIT and resume_args != locked.args:
                _round_start(approval=locked, args=resume_args, by=user)
        ApprovalVote.objects.create(
            approval=locked,
            user=user,
            round=locked.quorum_round,
            decision=decision,
            args=resume_args,
            args_hash=payload_hash(resume_args),
            message=message,
        )
        approving = decision in (ApprovalRequest.Decision.APPROVE, ApprovalRequest.Decision.EDIT)
        counted = votes if approving else []  # reject and respond are one person's call
        voters = [v.user.get_username() for v in counted] + [user.get_username()]
        event_record(
            action="approval.voted",
            actor=user,
            run_id=locked.run_id,
            approval_id=locked.id,
            tool=locked.tool,
            data={
                "decision": decision,
                "round": locked.quorum_round,
                "args": resume_args,
                "payload_hash": locked.payload_hash,
                "received": len(voters) if approving else 0,
                "required": required,
                "final": final,
                "message": message,
                "note": note,
            },
            request=request,
        )
        if final:
            _approval_finalise(
                approval=locked,
                user=user,
                decision=decision,
                final_args=resume_args,
                voters=voters,
                messages=[v.message for v in counted] + [message],
                required=required,
                tier=tier,
                note=note,
                request=request,
            )
    return locked


def _edit_tier_check(*, approval: ApprovalRequest, user: Any, args: dict[str, Any]) -> None:
    """An edit that moves the call into a higher tier needs someone allowed for that tier (a
    member of its required group, where it names one)."""
    new_tier = policy.tier_for_call(tool=approval.tool, args=args, default_tier=approval.tier)
    if new_tier == approval.tier or policy.tier_level(new_tier) <= policy.tier_level(approval.tier):
        return
    allowed, _ = user_may_approve_tier(user=user, tier=new_tier)
    row = policy.tier_get(new_tier)
    if allowed and row is not None and row.required_group_id is not None:
        # Where the tier names a required group, only its members may move a call into it.
        allowed = user_in_group(user=user, group_id=row.required_group_id)
    if not allowed:
        raise DecisionForbidden(
            f"These args put {approval.tool} in tier {new_tier} (above {approval.tier}); "
            f"you may not approve {new_tier} actions."
        )


def _required_group_check(*, tier: RiskTier | None, voters: list[Any]) -> None:
    if tier is None or tier.required_group_id is None:
        return
    if any(user_in_group(user=voter, group_id=tier.required_group_id) for voter in voters):
        return
    raise DecisionForbidden(
        f"Tier {tier.name} needs an approval from a member of {tier.required_group.name}; "
        "the last approval must come from one."
    )


def _round_start(*, approval: ApprovalRequest, args: dict[str, Any], by: Any) -> None:
    """An edit short of quorum replaces the proposal: new args, new payload hash, new round."""
    if approval.original_args is None:
        approval.original_args = approval.args
    approval.args = args
    payload = dict(approval.payload) if isinstance(approval.payload, dict) else {}
    payload["args"] = args
    payload["edited_by"] = by.get_username()
    approval.payload = payload
    approval.payload_hash = payload_hash(payload)
    approval.quorum_round += 1
    approval.save(
        update_fields=["original_args", "args", "payload", "payload_hash", "quorum_round"]
    )


def _approval_finalise(
    *,
    approval: ApprovalRequest,
    user: Any,
    decision: str,
    final_args: dict[str, Any],
    voters: list[str],
    messages: list[str],
    required: int,
    tier: RiskTier | None,
    note: str,
    request: Any,
) -> None:
    """Status, resume value, audit and notification of a final decision; advance on commit."""
    proposed = approval.proposed_args
    if decision == ApprovalRequest.Decision.APPROVE and payload_hash(final_args) != payload_hash(
        proposed
    ):
        decision = ApprovalRequest.Decision.EDIT  # approving an edited proposal runs the edit
    now = timezone.now()
    label = ", ".join(voters)[:150]
    message = "\n".join(m for m in dict.fromkeys(messages) if m)
    value = {
        "decision": decision,
        "args": final_args,
        "message": message,
        "by": label,
        "approval_id": approval.id,
        "tier": approval.tier,
        "policy_version": approval.policy_version,
        "decided_at": now.isoformat(),
    }
    approval_close(
        approval=approval,
        status=ApprovalRequest.DECISION_STATUS[decision],
        decided_by=user,
        label=label,
        value=value,
        now=now,
    )
    event_record(
        action="approval.decided",
        actor=user,
        run_id=approval.run_id,
        approval_id=approval.id,
        tool=approval.tool,
        data={
            "decision": decision,
            "role": _role(user),
            "shown": {"payload": approval.payload, "payload_hash": approval.payload_hash},
            "proposed_args": proposed,
            "final_args": final_args,
            "diff": args_diff(proposed, final_args) if decision == "edit" else {},
            "message": message,
            "note": note,
            "quorum": {"required": required, "approvers": voters},
            "policy_version": approval.policy_version,
        },
        request=request,
    )
    notifications_create(
        approval=approval,
        event=Notification.Event.DECISION,
        tier=tier,
        detail=f"{label} chose {decision}.",
    )
    run_advance_enqueue(run_id=approval.run_id)


def approval_close(
    *,
    approval: ApprovalRequest,
    status: str,
    decided_by: Any,
    label: str,
    value: dict[str, Any],
    now: dt.datetime,
) -> None:
    """Store the final outcome on a locked approval; nothing is due for it afterwards."""
    approval.status = status
    approval.decided_by = decided_by
    approval.decided_by_label = label
    approval.decided_at = now
    approval.decision = value
    approval.remind_at = None
    approval.escalate_at = None
    approval.save(
        update_fields=[
            "status",
            "decided_by",
            "decided_by_label",
            "decided_at",
            "decision",
            "remind_at",
            "escalate_at",
        ]
    )


def _decision_args(
    *, approval: ApprovalRequest, decision: str, args: dict[str, Any] | None, message: str
) -> dict[str, Any]:
    if decision not in ApprovalRequest.Decision.values:
        raise DecisionInvalid(
            "Unknown decision.",
            errors={"decision": f"must be one of {', '.join(ApprovalRequest.Decision.values)}"},
        )
    allowed = approval.allowed_decisions or ApprovalRequest.Decision.values
    if decision not in allowed:
        raise DecisionInvalid(
            "Decision not allowed here.",
            errors={
                "decision": f"{decision!r} is not allowed for this approval ({', '.join(allowed)})"
            },
        )
    if decision == "respond" and not message.strip():
        raise DecisionInvalid(
            "A response needs a message.", errors={"message": "required to respond"}
        )
    if decision != "edit":
        if args is not None and args != approval.args:
            raise DecisionInvalid(
                "Args can only change with an edit.",
                errors={"args": "only allowed with decision 'edit'"},
            )
        return approval.args
    if not isinstance(args, dict):
        raise DecisionInvalid(
            "An edit needs the edited args.", errors={"args": "required to edit (an object)"}
        )
    errors = args_errors(schema=approval.payload.get("args_schema"), args=args)
    if errors:
        raise DecisionInvalid("The edited args are not valid.", errors=errors)
    return args


def _role(user: Any) -> str:
    if user.is_superuser:
        return "admin"
    groups = sorted(user.groups.values_list("name", flat=True))
    return ",".join(groups) if groups else "approver"


def approval_expires_at(*, seconds: int) -> dt.datetime:
    return timezone.now() + dt.timedelta(seconds=seconds)
