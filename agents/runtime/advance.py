"""The advance loop: move a run's LangGraph thread as far as it can go now.

``run_advance`` is safe to repeat (invariant 10) and runs on at most one worker at a time
(invariant 6: ``runtime.lease``). It never resumes silently into other code (invariant 8:
``runtime.versions``). This is the one seam between the apps: pending interrupts become approval
requests (``hitl.protocol``), decided approvals become ``Command(resume=...)``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.db import transaction
from langgraph.types import Command

from agents.effects.compensation import run_compensate
from agents.effects.errors import (
    AdvanceDeadline,
    CompensationFailed,
    EffectInDoubt,
    LeaseNotHeld,
    RunCancelled,
)
from agents.hitl import protocol
from agents.runtime.budget import budget_check, budget_spend
from agents.runtime.checkpoint import checkpointer_get, graph_for, jsonable, thread_config
from agents.runtime.failures import failure_record, recovery_record
from agents.runtime.fenced_saver import EPOCH, GUARD
from agents.runtime.lease import (
    Heartbeat,
    LeaseLost,
    RunErased,
    RunIsCanary,
    lease_acquire,
    lease_epoch_raise,
    lease_owner_new,
    lease_release,
)
from agents.runtime.registry import UnknownAgent, agent_get, agent_is_registered
from agents.runtime.spans import (
    TRACE_KEY,
    segment_link,
    segment_outcome,
    segment_resumed,
    segment_span,
    segment_traceparent,
)
from agents.runtime.versions import graph_of_run, missing_nodes, version_resolve
from approvals import policy
from approvals import services as approval_services
from approvals.contract import is_external_agent
from approvals.models import AgentRun, ApprovalRequest
from approvals.services import run_transitions_fenced
from audit.services import event_record
from core.logcontext import run_log_context, run_log_thread_set
from core.prometheus import advance_observe
from core.sealing import datakey_scope

log = logging.getLogger(__name__)


def run_advance(*, run_id: Any) -> str:
    """Move the run as far as it can go now. Returns what happened (for logs and tests).

    Every line logged meanwhile carries the run's and thread's ids (core/logcontext.py); the
    advance's duration is observed by outcome (core/prometheus.py: memory, no query). Its
    sealed values share one key cache (core/sealing.py): one key read per advance, not one per
    value; it ends with the advance, so an erasure meanwhile holds from the next one."""
    started = time.monotonic()
    outcome = "failed: raised"
    with run_log_context(run_id=run_id), datakey_scope():
        try:
            outcome = _run_advance(run_id=run_id)
            return outcome
        finally:
            advance_observe(outcome=outcome, seconds=time.monotonic() - started)


def _run_advance(*, run_id: Any) -> str:
    owner = lease_owner_new()
    taken_at = time.monotonic()  # before the lease is written: its expiry counts from here
    try:
        run = lease_acquire(run_id=run_id, owner=owner)
    except RunErased:
        return "erased"
    except RunIsCanary:
        # A planted test proposal has no thread: a resume would start the graph from scratch.
        # Its approval closed it already (approvals/services/canaries.py); nothing is invoked,
        # and the wake flag a decision set is cleared (recovery would queue it again).
        AgentRun.objects.filter(pk=run_id, wake_requested=True).update(wake_requested=False)
        return "skipped: canary, nothing to invoke"
    if run is None:
        return "skipped: leased elsewhere or unknown"
    run_log_thread_set(run.thread_id)
    if is_external_agent(run.agent):  # it runs in its own service: only its requests move here
        return _remote_advance(run, owner=owner)
    outcome = ""
    with segment_span(run) as span:
        try:
            # Every transition below requires that this worker still holds the lease
            # (invariant 14), the failure and flag paths included.
            # The policy is read once per advance: the gate asks before and after its pause,
            # the ledger at execution, the approval requests for their tier and version.
            with run_transitions_fenced(lease_owner=owner), policy.policy_read_once():
                outcome = _advance_leased(run, owner=owner, taken_at=taken_at)
                return outcome
        except (LeaseLost, LeaseNotHeld, approval_services.LeaseLostError):
            outcome = "stopped: lease lost"
            return outcome
        finally:
            segment_outcome(span, outcome or "aborted")
            if outcome != "completed":  # run_mark_completed gave the lease back with the status
                lease_release(run_id=run.pk, owner=owner)


def _remote_advance(run: AgentRun, *, owner: str) -> str:
    """An external agent's run (agents/remote/): close its decided requests, under the lease."""
    from agents.remote.closing import remote_run_advance  # the remote room imports the runtime

    try:
        with run_transitions_fenced(lease_owner=owner), policy.policy_read_once():
            return remote_run_advance(run=run)
    except (LeaseLost, LeaseNotHeld, approval_services.LeaseLostError):
        return "stopped: lease lost"
    except approval_services.RunStopped:
        return "stopped: run moved meanwhile"
    finally:
        lease_release(run_id=run.pk, owner=owner)


def _advance_leased(run: AgentRun, *, owner: str, taken_at: float) -> str:
    try:
        with Heartbeat(
            run_id=run.pk, owner=owner, epoch=run.lease_epoch, taken_at=taken_at
        ) as beat:
            return _advance_handled(run, beat)
    except approval_services.RunStopped:
        # Cancelled or ended meanwhile (also while a handler below recorded its outcome).
        fresh = AgentRun.objects.get(pk=run.pk)
        if fresh.cancel_requested:
            return _compensate_cancelled(fresh)
        return f"stopped: run is {fresh.status}"


def _advance_handled(run: AgentRun, beat: Heartbeat) -> str:
    """The advance, and what each way it can stop means for the run."""
    try:
        if run.flag and not run.cancel_requested:
            return f"flagged: {run.flag}"  # a person must look first; nothing died
        if run.status == AgentRun.Status.RUNNING:  # the previous advance died mid-step
            dead = recovery_record(run)
            if dead is not None:
                return dead
            run = AgentRun.objects.get(pk=run.pk)
        return _advance(run, beat)
    except (
        LeaseLost,
        LeaseNotHeld,
        approval_services.LeaseLostError,
        approval_services.RunStopped,
    ):
        raise
    except RunCancelled:
        return _compensate_cancelled(AgentRun.objects.get(pk=run.pk))
    except AdvanceDeadline as exc:
        # A call would not fit in what is left of this task: continue in a new one, where it
        # has its full time. Not a failure (once per call: see the ledger).
        return _continue(run, reason=str(exc), deferred_key=exc.key)
    except EffectInDoubt as exc:
        # A person settles it (the effect is escalated); the run waits for them, flagged.
        approval_services.run_flag(run=AgentRun.objects.get(pk=run.pk), reason=str(exc))
        return "flagged: effect in doubt"
    except Exception as exc:  # noqa: BLE001 - every failure is classified and recorded
        return failure_record(run, exc)


def _continue(run: AgentRun, *, reason: str, deferred_key: str = "") -> str:
    """The step is checkpointed (or will run again): continue in a new task before the task
    timeout kills this one."""
    approval_services.run_mark_queued(run=run, reason=reason, deferred_key=deferred_key)
    approval_services.run_advance_enqueue(run_id=run.pk)
    return "continuing: advance deadline reached"


def _advance(run: AgentRun, beat: Heartbeat) -> str:
    if run.cancel_requested or run.status == AgentRun.Status.CANCELLED:
        return _compensate_cancelled(run)
    if run.is_terminal:
        return f"nothing to do: {run.status}"
    if run.flag:
        return f"flagged: {run.flag}"
    try:
        current = agent_get(run.agent)
    except UnknownAgent as exc:
        approval_services.run_flag(run=run, reason=str(exc))
        return "flagged: unknown agent"
    head = checkpointer_get().get_tuple(thread_config(run))
    segment_link(head.metadata if head is not None else None)
    if head is not None and (head.metadata or {}).get(EPOCH, 0) >= beat.epoch:
        # The thread holds checkpoints of a later epoch than the run row knows (a restored
        # database): this lease must outrank them, or its writes would not become the head.
        beat.epoch = lease_epoch_raise(run_id=run.pk, owner=beat.owner, above=head.metadata[EPOCH])
    if head is None:
        spec = (
            agent_get(run.agent, run.graph_version)
            if agent_is_registered(run.agent, run.graph_version)
            else current
        )
        graph = graph_for(spec)
        run = approval_services.run_mark_running(run=run, resumed=False)
        return _drive(run, graph, spec.graph_input(run.input), spec.version, beat)

    resolved = version_resolve(run, current)
    if resolved is None:
        return "flagged: version skew"
    spec, graph, migration = resolved
    state = graph.get_state(thread_config(run))
    if state.interrupts:
        resume = _sync_and_collect(run, state.interrupts)
        if not resume:
            approval_services.run_mark_waiting(run=run)
            return "waiting"
        missing = missing_nodes(run, graph)
        if missing:
            approval_services.run_flag(
                run=run,
                reason=f"pending node(s) {', '.join(missing)} no longer exist in "
                f"{run.agent} v{spec.version}",
            )
            return "flagged: pending node removed"
        command = Command(resume=resume, update=migration) if migration else Command(resume=resume)
        run = approval_services.run_mark_running(run=run, resumed=True)
        return _drive(run, graph, command, spec.version, beat)
    if state.next or state.tasks:
        # A worker died mid-run: continue from the last checkpoint. ``next`` alone is not
        # enough: a task whose writes were saved counts as finished, and the tasks they trigger
        # appear only with the checkpoint that closes the step, which a kill (or a refused
        # put) can leave unwritten. ``tasks`` still lists that task, so the thread is driven on
        # and LangGraph applies its saved writes without running it again.
        run = approval_services.run_mark_running(run=run, resumed=False)
        update = Command(update=migration) if migration else None
        return _drive(run, graph, update, spec.version, beat)
    approval_services.run_mark_completed(run=run, output=jsonable(state.values))
    return "completed"


def _sync_and_collect(run: AgentRun, interrupts: Any) -> dict[str, Any]:
    """Create missing approval requests; return {interrupt_id: resume value} for decided ones.

    The run's approvals for these interrupts are read once; the requests are synced (the run
    locked, the missing ones created and audited) only when some are missing."""
    items = _approval_items(interrupts)
    values = {intr.id: intr.value for intr in interrupts}
    found = {
        (a.interrupt_id, a.action_index): a
        for a in run.approvals.filter(interrupt_id__in=list(values))
    }
    if any((item["interrupt_id"], item["action_index"]) not in found for item in items):
        created = approval_services.approval_requests_sync(run=run, requests=items)
        found.update({(a.interrupt_id, a.action_index): a for a in created})
        if any((item["interrupt_id"], item["action_index"]) not in found for item in items):
            # Created meanwhile by another advance, or not at all (the run was cancelled or
            # ended): what is stored decides.
            found = {
                (a.interrupt_id, a.action_index): a
                for a in run.approvals.filter(interrupt_id__in=list(values))
            }
    by_interrupt: dict[str, list[ApprovalRequest]] = {}
    for (interrupt_id, _), approval in sorted(found.items(), key=lambda kv: kv[0][1]):
        by_interrupt.setdefault(interrupt_id, []).append(approval)
    resume: dict[str, Any] = {}
    for interrupt_id, approvals in by_interrupt.items():
        if any(a.status == ApprovalRequest.Status.PENDING for a in approvals):
            continue
        decisions = [a.decision for a in approvals]
        resume[interrupt_id] = protocol.resume_value(
            value=values[interrupt_id], decisions=decisions
        )
    return resume


def _approval_items(interrupts: Any) -> list[dict[str, Any]]:
    """The approval request items of the pending interrupts (hitl.protocol)."""
    items: list[dict[str, Any]] = []
    for intr in interrupts:
        items.extend(
            protocol.approval_items(
                interrupt_id=intr.id,
                value=intr.value,
                response_schema=getattr(intr, "response_schema", None),
            )
        )
    return items


def _drive(run: AgentRun, graph: Any, graph_input: Any, version: str, beat: Heartbeat) -> str:
    config = thread_config(run, version=version)
    segment_resumed(run, version=version)
    traceparent = segment_traceparent()
    if traceparent:  # the next segment links to this one (runtime.spans)
        config["metadata"][TRACE_KEY] = traceparent
    # The ledger refuses to call downstream unless this worker still holds the lease, and no
    # tool call waits past the advance's deadline (well below the task timeout).
    deadline = time.time() + settings.RUN_ADVANCE_DEADLINE_SECONDS
    config["configurable"]["lease_owner"] = beat.owner
    config["configurable"]["deadline"] = deadline
    # The checkpointer writes only while the lease is certainly held, and each checkpoint
    # records the lease's epoch: a stale worker's write never becomes the head (fenced_saver).
    config["configurable"][EPOCH] = beat.epoch
    config["configurable"][GUARD] = beat
    for update in graph.stream(graph_input, config, stream_mode="updates", durability="sync"):
        # The step's budget and what the runner checks between steps, in one statement.
        fresh = budget_spend(run, update)
        if beat.lost.is_set():
            raise LeaseLost()
        if fresh is not None:  # None: the update was only the pause (no step, no statement)
            if fresh.cancel_requested:
                return _compensate_cancelled(run)
            budget_check(fresh)
        if time.time() > deadline:
            return _continue(run, reason="advance deadline reached")
    state = graph.get_state(thread_config(run))
    if state.interrupts:
        # The approval requests and the move to waiting, in one transaction. A decision made
        # since we took the lease set the wake flag: the lease release queues the next advance.
        approval_services.approval_requests_sync(
            run=run, requests=_approval_items(state.interrupts), waiting=True
        )
        return "waiting"
    if state.next:
        raise RuntimeError(f"graph stopped with pending nodes {state.next} and no interrupt")
    approval_services.run_mark_completed(run=run, output=jsonable(state.values))
    return "completed"


def _compensate_cancelled(run: AgentRun) -> str:
    """Undo a cancelled run's applied effects in reverse order, each exactly once."""
    try:
        # Building the graph registers tools that agents declare at build time, so their
        # compensations are known in this process too.
        graph_of_run(run)
    except Exception:  # noqa: BLE001 - compensation of registered tools must still run
        log.exception("could not build the graph of cancelled run %s", run.pk)
    try:
        undone = run_compensate(run_id=str(run.pk))
    except CompensationFailed as exc:
        with transaction.atomic():
            event_record(
                action="run.escalated",
                actor=f"agent:{run.pk}",
                run_id=run.pk,
                data={"keys": exc.failed},
                private={"error": f"compensation failed: {exc}"},
            )
        # Handed to a person; an effect of it that is settled later wakes the run again.
        return f"cancelled: {len(exc.compensated)} compensated, {len(exc.failed)} not yet: {exc}"
    return f"cancelled: {len(undone)} effect(s) compensated"
