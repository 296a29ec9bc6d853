"""Checkpoint retention: finished runs keep their full checkpoint history for a while, then are
pruned to their final checkpoint or have their thread deleted. The audit trail, which is never
pruned, stays the run's long-lived summary (docs/operations.md, "Checkpoint retention").

A pass (every minute, ``agents.tasks.checkpoints_prune``; or ``manage.py checkpoints_prune``)
reads, per policy scope, finished runs past their policy in (finished_at, id) order from where
the last pass of that scope stopped, at most CHECKPOINT_PRUNE_BATCH in all. It then locks those
runs and checks each again: a run must still be finished (completed, failed, cancelled, dead),
past its policy, with no lease held and no advance asked for. A run that fails the check now
(an advance is compensating a cancelled run, say) is deferred: the scope's cursor stops before
it, so the next pass sees it again. Everything else is pruned in one transaction with one audit
event, ``checkpoints.pruned``, holding counts and run ids, never contents.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from agents.retention_models import (
    PrunedRun,
    RetentionAction,
    RetentionCursor,
    RetentionPass,
    RetentionPolicy,
)
from agents.runtime import retention_sql
from approvals.models import AgentRun
from audit.services import event_record

ACTOR = "system:retention"
DEFAULT_SCOPE = ""
# The default under "delete" reads from its own cursor: after CHECKPOINT_RETENTION_ACTION
# becomes "delete" (a restart, which resets no cursor), it reads its runs from the start once,
# the ones pruned to final before included.
DEFAULT_DELETE_SCOPE = "(default: delete)"
EARLIEST = dt.datetime.min.replace(tzinfo=dt.UTC)
DELTA_REASON = "uses a DeltaChannel: its final state is rebuilt from older checkpoints"


@dataclass(frozen=True)
class Policy:
    """The policy in force for one scope (an agent, or every agent without a policy)."""

    scope: str
    keep_days: int
    action: str
    explicit: bool

    @property
    def keeps_forever(self) -> bool:
        return self.keep_days == 0

    def cutoff(self, now: dt.datetime) -> dt.datetime:
        # keep_days may be any PositiveIntegerField value: past the calendar, nothing is due.
        try:
            return now - dt.timedelta(days=self.keep_days)
        except OverflowError:
            return EARLIEST


def retention_default() -> Policy:
    action = settings.CHECKPOINT_RETENTION_ACTION
    return Policy(
        scope=DEFAULT_DELETE_SCOPE if action == RetentionAction.DELETE else DEFAULT_SCOPE,
        keep_days=settings.CHECKPOINT_RETENTION_DAYS,
        action=action,
        explicit=False,
    )


def retention_policies() -> dict[str, Policy]:
    """The admin's policies by agent name (the default applies to every other agent)."""
    return {
        p.agent: Policy(scope=p.agent, keep_days=p.keep_days, action=p.action, explicit=True)
        for p in RetentionPolicy.objects.all()
    }


def retention_policy_for(agent: str, policies: dict[str, Policy] | None = None) -> Policy:
    policies = retention_policies() if policies is None else policies
    return policies.get(agent) or retention_default()


# --- policy changes (the admin) ------------------------------------------------------------------


def _policy_state(policy: RetentionPolicy) -> dict[str, Any]:
    return {"agent": policy.agent, "keep_days": policy.keep_days, "action": policy.action}


def retention_policy_save(
    *, policy: RetentionPolicy, actor: Any, created: bool, request: Any = None
) -> RetentionPolicy:
    """Save an agent's policy, audited ("retention.policy_changed")."""
    with transaction.atomic():
        policy.save()
        # Runs may move between scopes: every scope reads again from its start once.
        RetentionCursor.objects.all().delete()
        event_record(
            action="retention.policy_changed",
            actor=actor,
            data={"change": "created" if created else "changed", **_policy_state(policy)},
            request=request,
        )
    return policy


def retention_policy_delete(*, policy: RetentionPolicy, actor: Any, request: Any = None) -> None:
    """Remove an agent's policy (its runs follow the default again), audited."""
    with transaction.atomic():
        state = _policy_state(policy)
        policy.delete()
        RetentionCursor.objects.all().delete()
        event_record(
            action="retention.policy_changed",
            actor=actor,
            data={"change": "deleted", **state},
            request=request,
        )


# --- selection -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    run_id: Any
    thread_id: str
    agent: str
    finished_at: dt.datetime
    scope: str


def _due(policy: Policy, *, explicit: list[str], now: dt.datetime) -> Any:
    runs = AgentRun.objects.filter(
        finished_at__isnull=False,
        finished_at__lt=policy.cutoff(now),
        status__in=AgentRun.TERMINAL,
    )
    if policy.explicit:
        runs = runs.filter(agent=policy.scope)
    elif explicit:
        runs = runs.exclude(agent__in=explicit)
    cursor = RetentionCursor.objects.filter(scope=policy.scope).first()
    if cursor is not None:
        runs = runs.filter(
            Q(finished_at__gt=cursor.finished_at)
            | Q(finished_at=cursor.finished_at, id__gt=cursor.run_id)
        )
    return runs.filter(~Exists(_settled(policy.action).filter(run_id=OuterRef("pk"))))


def _settled(action: str) -> Any:
    """The retention records that leave nothing more for ``action`` to do: any, for "final";
    only a deletion for "delete" (a run pruned to final or kept before a policy became
    "delete" still holds checkpoints that policy says must go)."""
    if action == RetentionAction.DELETE:
        return PrunedRun.objects.filter(outcome=PrunedRun.Outcome.DELETE)
    return PrunedRun.objects.all()


def retention_candidates(
    *, now: dt.datetime | None = None, limit: int | None = None
) -> list[Candidate]:
    """Finished runs past their policy that no pass has pruned, oldest first per scope."""
    now = now or timezone.now()
    remaining = settings.CHECKPOINT_PRUNE_BATCH if limit is None else limit
    policies = retention_policies()
    explicit = sorted(policies)
    found: list[Candidate] = []
    for policy in [*policies.values(), retention_default()]:
        if remaining <= 0:
            break
        if policy.keeps_forever:
            continue
        rows = (
            _due(policy, explicit=explicit, now=now)
            .order_by("finished_at", "id")
            .values_list("id", "thread_id", "agent", "finished_at")[:remaining]
        )
        batch = [Candidate(*row, scope=policy.scope) for row in rows]
        found.extend(batch)
        remaining -= len(batch)
    return found


# --- the pass ------------------------------------------------------------------------------------


@dataclass
class PassResult:
    """What one pass did; ``deferred`` were due but not prunable at the moment of pruning."""

    final: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)
    rows: retention_sql.Deleted = field(default_factory=retention_sql.Deleted)

    @property
    def runs(self) -> int:
        return len(self.final) + len(self.deleted)

    def summary(self) -> dict[str, int]:
        return {
            "runs": self.runs,
            "pruned_to_final": len(self.final),
            "deleted": len(self.deleted),
            "kept": len(self.kept),
            "deferred": len(self.deferred),
            "checkpoints": self.rows.checkpoints,
            "writes": self.rows.writes,
            "blobs": self.rows.blobs,
        }


def _prunable(run: AgentRun, policy: Policy, now: dt.datetime) -> bool:
    """The check at prune time, on the locked row: finished, past its policy, nobody on it."""
    leased = bool(run.lease_owner) and run.lease_expires_at is not None
    return (
        run.status in AgentRun.TERMINAL
        and run.finished_at is not None
        and not policy.keeps_forever
        and run.finished_at < policy.cutoff(now)
        and not run.wake_requested
        and not (leased and run.lease_expires_at > now)
    )


def checkpoints_prune(candidates: list[Candidate], *, now: dt.datetime | None = None) -> PassResult:
    """Prune these candidates' checkpoints (each checked again under its row lock), record
    them, move each scope's cursor, and audit the pass, all in one transaction."""
    now = now or timezone.now()
    result = PassResult()
    if not candidates:
        return result
    started = time.monotonic()
    with transaction.atomic():
        policies = retention_policies()
        # Rows another transaction holds (an advance moving the run) are skipped, not waited
        # for: they are deferred to the next pass. SQLite takes the database's write lock.
        locked = {
            run.pk: run
            for ids in _chunks([c.run_id for c in candidates])
            for run in AgentRun.objects.select_for_update(skip_locked=True)
            .filter(pk__in=ids)
            .only(
                "id",
                "thread_id",
                "agent",
                "status",
                "finished_at",
                "wake_requested",
                "lease_owner",
                "lease_expires_at",
            )
        }
        # Read under the runs' locks: what another pass recorded for them is seen here.
        done = {
            run: outcome
            for ids in _chunks(list(locked))
            for run, outcome in PrunedRun.objects.filter(run_id__in=ids).values_list(
                "run", "outcome"
            )
        }
        final: list[AgentRun] = []
        delete: list[AgentRun] = []
        for candidate in candidates:
            run = locked.get(candidate.run_id)
            policy = retention_policy_for(candidate.agent, policies)
            prior = done.get(candidate.run_id)
            settled = prior is not None and (
                policy.action != RetentionAction.DELETE or prior == PrunedRun.Outcome.DELETE
            )
            if run is None or settled or not _prunable(run, policy, now):
                result.deferred.append(str(candidate.run_id))
                continue
            (delete if policy.action == RetentionAction.DELETE else final).append(run)
        delta = retention_sql.threads_using_delta_channels([r.thread_id for r in final])
        kept = [r for r in final if r.thread_id in delta]
        final = [r for r in final if r.thread_id not in delta]
        result.rows += retention_sql.threads_prune_final([r.thread_id for r in final])
        result.rows += retention_sql.threads_delete([r.thread_id for r in delete])
        result.final = [str(r.pk) for r in final]
        result.deleted = [str(r.pk) for r in delete]
        result.kept = [str(r.pk) for r in kept]
        # A run pruned to final or kept before its policy became "delete": recorded anew.
        for ids in _chunks([r.pk for r in delete]):
            PrunedRun.objects.filter(run_id__in=ids).delete()
        PrunedRun.objects.bulk_create(
            [PrunedRun(run=r, outcome=PrunedRun.Outcome.FINAL, pruned_at=now) for r in final]
            + [PrunedRun(run=r, outcome=PrunedRun.Outcome.DELETE, pruned_at=now) for r in delete]
            + [
                PrunedRun(run=r, outcome=PrunedRun.Outcome.KEPT, reason=DELTA_REASON, pruned_at=now)
                for r in kept
            ]
        )
        _cursors_advance(candidates, deferred=set(result.deferred))
        if result.runs or result.kept:
            _pass_record(result, now=now, seconds=time.monotonic() - started)
    return result


def _chunks(ids: list[Any], size: int = 1000) -> list[list[Any]]:
    """``ids`` in lists a statement can bind on any database (stock SQLite: 32766 at most)."""
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def _cursors_advance(candidates: list[Candidate], *, deferred: set[str]) -> None:
    """Each scope's cursor moves to its last candidate before the first deferred one."""
    last: dict[str, Candidate] = {}
    stopped: set[str] = set()
    for candidate in candidates:  # in (finished_at, id) order within each scope
        if candidate.scope in stopped:
            continue
        if str(candidate.run_id) in deferred:
            stopped.add(candidate.scope)
            continue
        last[candidate.scope] = candidate
    for scope, candidate in last.items():
        RetentionCursor.objects.update_or_create(
            scope=scope,
            defaults={"finished_at": candidate.finished_at, "run_id": candidate.run_id},
        )


def _pass_record(result: PassResult, *, now: dt.datetime, seconds: float) -> None:
    summary = result.summary()
    RetentionPass.objects.create(
        at=now,
        runs_final=summary["pruned_to_final"],
        runs_deleted=summary["deleted"],
        runs_kept=summary["kept"],
        runs_deferred=summary["deferred"],
        checkpoints=summary["checkpoints"],
        writes=summary["writes"],
        blobs=summary["blobs"],
        seconds=round(seconds, 3),
    )
    event_record(
        action="checkpoints.pruned",
        actor=ACTOR,
        data={
            **summary,
            "run_ids": {
                "pruned_to_final": result.final,
                "deleted": result.deleted,
                "kept": result.kept,
            },
        },
    )


def checkpoints_prune_pass(*, limit: int | None = None) -> PassResult:
    """One bounded pass: select the due runs, then prune them."""
    now = timezone.now()
    return checkpoints_prune(retention_candidates(now=now, limit=limit), now=now)
