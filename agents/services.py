"""Writes that start, stop and fork runs. The API and the console pages call these."""

from __future__ import annotations

import contextlib
import datetime as dt
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from pydantic import ValidationError

from agents.effects.reconcile import UNSETTLED, effect_settled_follow_up, effect_tier
from agents.effects.rows import effect_mark
from agents.models import Effect, RunStartKey, Settlement
from agents.runtime.checkpoint import thread_config
from agents.runtime.registry import UnknownAgent, agent_get
from agents.runtime.versions import checkpoint_version, graph_of_run
from agents.selectors import retention_notice, run_history, run_pruned
from agents.subjects import subject_digests_of, subjects_index, subjects_write
from agents.tools import validation_errors
from approvals import policy
from approvals import services as approval_services
from approvals.contract import is_external_agent
from approvals.models import AgentRun
from approvals.permissions import user_in_group, user_may_approve_tier
from audit.canonical import json_has_nul, payload_hash
from audit.services import event_record
from core.errors import ApplicationError
from core.json_limits import json_problem

# A first request that died before it created its run frees its key after this long.
IN_FLIGHT_GRACE = dt.timedelta(seconds=60)


class RunStartError(ApplicationError):
    """A run that cannot start (400 unless a subclass says otherwise)."""


class RunInputInvalid(RunStartError):
    """Unknown agent or input that does not validate (400, fields named)."""


class IdempotencyMismatch(RunStartError):
    """Same Idempotency-Key, other body (422)."""

    status_code = 422


class IdempotencyErased(RunStartError):
    """The run this Idempotency-Key started was erased (410): it is not started again."""

    status_code = 410


class IdempotencyInFlight(RunStartError):
    """The first request with this key is still being processed (409)."""

    status_code = 409


class SettleRefused(ApplicationError):
    """The effect cannot be settled by this person now."""

    status_code = 409


class ForkRefused(ApplicationError):
    """Forking from after a decided gate would reuse that decision (invariant 11; 409)."""

    status_code = 409


def run_start(*, agent: str, input: Any, user: Any, request: Any = None) -> AgentRun:
    """Validate against the registry and queue a run of the agent's current version."""
    try:
        spec = agent_get(agent)
    except UnknownAgent as exc:
        raise RunInputInvalid(str(exc), errors={"agent": str(exc)}) from None
    if json_has_nul(input):
        raise RunInputInvalid(
            "The input contains a NUL character.", errors={"input": "must not contain \\u0000"}
        )
    inexact = json_problem(
        input, prefix="input", exact=True
    )  # the audit hashes RFC 8785 text (invariant 15)
    if inexact:
        raise RunInputInvalid(
            "The input cannot be recorded exactly.", errors={inexact.path: inexact.message}
        )
    try:
        clean = spec.validate_input(input)
    except ValidationError as exc:
        errors = {f"input.{field}": msg for field, msg in validation_errors(exc).items()}
        raise RunInputInvalid("The input is not valid for this agent.", errors=errors) from None
    except TypeError as exc:
        raise RunInputInvalid(str(exc), errors={"input": str(exc)}) from None
    digests = subject_digests_of(clean, declared=spec.subjects)
    # The run and its subjects' digests commit together (an input naming nobody needs no
    # outer transaction: run_create has its own).
    with transaction.atomic() if digests else contextlib.nullcontext():
        run = approval_services.run_create(
            agent=spec.name,
            graph_version=spec.version,
            input=clean,
            requested_by=user,
            request=request,
        )
        subjects_write(run=run, digests=digests)
    return run


def run_start_idempotent(
    *, key: str, agent: str, input: Any, user: Any, request: Any = None
) -> tuple[AgentRun, bool]:
    """(run, created). Same key + same body -> the same run; other body -> 422; in flight -> 409."""
    body_hash = payload_hash({"agent": agent, "input": input})
    try:
        with transaction.atomic():
            claim = RunStartKey.objects.create(user=user, key=key, request_hash=body_hash)
    except IntegrityError:
        claim = RunStartKey.objects.filter(user=user, key=key).first()
        if claim is None:  # the first request failed and freed the key just now
            raise IdempotencyInFlight(
                "A request with this Idempotency-Key just finished; retry.",
                errors={"Idempotency-Key": "first request still in flight; retry later"},
            ) from None
        if claim.run_id is not None and claim.request_hash == "":
            raise IdempotencyErased(
                "The run this Idempotency-Key started was erased; it is not started again.",
                errors={"Idempotency-Key": "its run was erased"},
            ) from None
        if claim.request_hash != body_hash:
            raise IdempotencyMismatch(
                "This Idempotency-Key was used with another request body.",
                errors={"Idempotency-Key": "already used with a different body"},
            ) from None
        if claim.run_id is not None:
            return claim.run, False
        if timezone.now() - claim.created_at < IN_FLIGHT_GRACE:
            raise IdempotencyInFlight(
                "A request with this Idempotency-Key is still in flight.",
                errors={"Idempotency-Key": "first request still in flight; retry later"},
            ) from None
        # The first request died before creating its run: take the key over, atomically, so
        # two retries racing for a stale key cannot both create a run.
        taken = RunStartKey.objects.filter(
            pk=claim.pk, run__isnull=True, created_at=claim.created_at
        ).update(created_at=timezone.now())
        if not taken:
            raise IdempotencyInFlight(
                "A request with this Idempotency-Key is still in flight.",
                errors={"Idempotency-Key": "first request still in flight; retry later"},
            ) from None
    try:
        # The run and the key's link to it commit together: a crash in between cannot leave
        # a run whose key a retry would take over and start again.
        with transaction.atomic():
            run = run_start(agent=agent, input=input, user=user, request=request)
            RunStartKey.objects.filter(pk=claim.pk).update(run=run)
    except Exception:
        # Any refusal or error frees the key, so a retry with a good body can use it.
        RunStartKey.objects.filter(pk=claim.pk, run__isnull=True).delete()
        raise
    return run, True


def run_cancel(*, run: AgentRun, user: Any, request: Any = None) -> AgentRun:
    """Stop the run and compensate the effects it already applied (in the background)."""
    if run.is_terminal or run.erased_at is not None:  # an erased run is never moved again
        return run
    run = approval_services.run_mark_cancelled(run=run, user=user, request=request)
    # The advance of a cancelled run compensates its applied effects, exactly once each.
    approval_services.run_advance_enqueue(run_id=run.id)
    return run


def run_fork(*, run: AgentRun, checkpoint_id: str, user: Any, request: Any = None) -> AgentRun:
    """A new run whose thread starts from the state at ``checkpoint_id`` (a new branch).

    The fork has its own thread id, so its tool calls are new actions that go through the gate
    again. A step after a decided gate is refused (``ForkRefused``): its state carries that
    decision, and a fork never inherits one (invariant 11; the ledger refuses it too).
    """
    if run.erased_at is not None:
        raise ForkRefused(
            "This run's personal data was erased: it cannot be forked.",
            errors={"checkpoint_id": "erased"},
        )
    if is_external_agent(run.agent):
        raise ForkRefused(
            "This run belongs to an external agent that runs in its own service: the console "
            "holds none of its checkpoints, so it cannot be forked here.",
            errors={"checkpoint_id": "external agent"},
        )
    pruned = run_pruned(run=run)
    if pruned is not None:
        # The pauses answered before the kept step are gone: a fork could not be checked.
        raise ForkRefused(retention_notice(pruned), errors={"checkpoint_id": "pruned"})
    graph = graph_of_run(run)
    history = run_history(run=run)
    index = next((i for i, s in enumerate(history) if s["checkpoint_id"] == checkpoint_id), None)
    if index is None:
        raise LookupError(f"checkpoint {checkpoint_id} is not part of run {run.pk}")
    if not history[index]["forkable"]:
        pause = max(i for i in range(index) if history[i]["interrupt_ids"])
        answered = history[pause]["interrupt_ids"]
        approval = run.approvals.filter(interrupt_id__in=answered).order_by("id").first()
        decided = f"approval #{approval.pk}" if approval else "a decided approval"
        raise ForkRefused(
            f"This step comes after {decided}: a fork from here would act on that decision "
            f"without anyone deciding again. Fork from step {history[pause]['step']}, where "
            "the run waited for a person, to ask again.",
            errors={"checkpoint_id": "after a decided approval"},
        )
    snapshot = graph.get_state(
        {"configurable": {"thread_id": run.thread_id, "checkpoint_id": checkpoint_id}}
    )
    if snapshot.metadata is None:  # pruned since the history was read
        raise ForkRefused(
            "This step's checkpoint was pruned by retention a moment ago.",
            errors={"checkpoint_id": "pruned"},
        )
    with transaction.atomic():
        # Under the parent's row lock, read again: an erasure that committed since the page
        # read the run refuses the fork, and one still to come sees the fork (it locks too).
        parent = AgentRun.objects.select_for_update().get(pk=run.pk)
        if parent.erased_at is not None:
            raise ForkRefused(
                "This run's personal data was erased: it cannot be forked.",
                errors={"checkpoint_id": "erased"},
            )
        child = approval_services.run_create(
            agent=run.agent,
            graph_version=checkpoint_version(run) or run.graph_version,
            input=parent.input,
            requested_by=user,
            request=request,
            parent=run,
            forked_from_checkpoint=checkpoint_id,
            fork_data={
                "step": history[index]["step"],
                "next": list(snapshot.next),
            },
        )
        subjects_index(run=child, run_input=parent.input)  # a fork names whom its parent named
        if index > 0:
            last_nodes = history[index]["nodes"]
            as_node = last_nodes[0] if last_nodes and last_nodes[0] in graph.nodes else None
            graph.update_state(
                thread_config(child, version=child.graph_version),
                dict(snapshot.values),
                as_node=as_node,
            )
    return child


def run_state_view_audit(
    *, run: AgentRun, checkpoint_id: str, user: Any, request: Any = None
) -> None:
    """Time travel is audited: record who looked at which step."""
    with transaction.atomic():
        event_record(
            action="run.state_viewed",
            actor=user,
            run_id=run.pk,
            request=request,
            data={"checkpoint_id": checkpoint_id},
        )


def effect_settle(
    *, effect: Effect, outcome: str, user: Any, note: str = "", request: Any = None
) -> Effect:
    """A person's answer for an effect the console could not settle (invariant 13): it happened
    (``done``), it did not and must not be called (``not_done``), or call it once more
    (``retry``). Audited; once no effect of the run waits for a person, the run goes on."""
    _settle_check(effect=effect, outcome=outcome, user=user, note=note)
    name = user.get_username()
    said = f"settled by {name}: {Settlement(outcome).label.lower()}"
    if outcome == Settlement.DONE:
        update = {"status": Effect.Status.SUCCEEDED, "result": {"settled_by": name, "note": note}}
    else:
        update = {"status": Effect.Status.FAILED, "error": said}
    with transaction.atomic():
        moved = effect_mark(
            effect,
            where={"status__in": UNSETTLED, "escalated_at__isnull": False},
            update={**update, "settlement": outcome, "settled_by": name},
            action="effect.settled",
            actor=user,
            data={"outcome": outcome, "was": effect.status},
            private={"note": note},
        )
        if not moved:
            raise SettleRefused("Someone settled it first.", errors={"outcome": "settled"})
        effect_settled_follow_up(
            effect, actor=user, reason=f"{effect.key}: {said}", was_escalated=True, request=request
        )
    effect.refresh_from_db()
    return effect


NOTE_MAX = 2000


def _settle_check(*, effect: Effect, outcome: str, user: Any, note: str) -> None:
    """Who may answer for an effect, and with what: someone who may decide its tier (it is the
    same action, and "call it again" calls it), never the run's requester."""
    if effect.run.requested_by_id == user.pk:
        raise SettleRefused(
            "You requested this run; someone else must settle its effects (four eyes).",
            errors={"outcome": "forbidden"},
        )
    tier = effect_tier(effect)
    if effect.tier and policy.tier_level(effect.tier) > policy.tier_level(tier):
        tier = effect.tier  # the tier it was escalated in, if the policy has been lowered since
    allowed, reason = user_may_approve_tier(user=user, tier=tier)
    row = policy.tier_get(tier)
    if allowed and row is not None and row.required_group_id is not None:
        # One person's answer: for a tier whose quorum needs a member of a group, that member.
        allowed = user_in_group(user=user, group_id=row.required_group_id)
        reason = f"Only members of {row.required_group.name} may settle {tier} effects."
    if not allowed:
        raise SettleRefused(
            reason or "Only reviewers may settle effects.", errors={"outcome": "forbidden"}
        )
    if outcome not in Settlement.values:
        raise SettleRefused(
            "Unknown answer.", errors={"outcome": f"must be one of {', '.join(Settlement.values)}"}
        )
    if "\x00" in note or len(note) > NOTE_MAX:
        raise SettleRefused(
            "The note is not valid text.",
            errors={"note": f"at most {NOTE_MAX} characters, no NUL characters"},
        )
    if effect.status not in UNSETTLED or effect.escalated_at is None:
        raise SettleRefused(
            f"This effect is {effect.status} and waits for nobody.", errors={"outcome": "settled"}
        )
    quiet_from = effect.updated_at + dt.timedelta(seconds=settings.EFFECT_SETTLE_AFTER_SECONDS)
    if outcome == Settlement.NOT_DONE and timezone.now() < quiet_from:
        # A timed-out call may still land: "it did not happen" cannot be known yet.
        raise SettleRefused(
            f"A call made at {timezone.localtime(effect.updated_at):%H:%M:%S} may still land; "
            f'answer "it did not happen" from {timezone.localtime(quiet_from):%H:%M:%S}.',
            errors={"outcome": "a call may still land"},
        )
    if outcome == Settlement.RETRY and effect.run.cancel_requested and not effect.compensates_id:
        raise SettleRefused(
            "The run was cancelled: no effect of it is called again.",
            errors={"outcome": "the run was cancelled"},
        )
