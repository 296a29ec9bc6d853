"""The runner: start, advance, resume and recover a run's LangGraph thread.

``run_advance`` is safe to repeat (invariant 10) and runs on at most one worker at a time
(invariant 6: a lease with a heartbeat). It never resumes silently into other code
(invariant 8): the graph version stored in the checkpoint picks the graph, by the agent's
drain or migrate policy, and a thread whose pending node no longer exists is flagged.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import random
import socket
import threading
import traceback
import uuid
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from langchain_core.messages import BaseMessage
from langgraph.types import Command

from agents import protocol
from agents.checkpoint import checkpointer_get
from agents.ledger import LeaseNotHeld
from agents.registry import AgentSpec, UnknownAgent, agent_get, agent_is_registered
from approvals import services as approval_services
from approvals.models import AgentRun, ApprovalRequest
from audit.services import event_record

log = logging.getLogger(__name__)

_graphs: dict[tuple[str, str, int], tuple[AgentSpec, Any]] = {}
_graphs_lock = threading.Lock()


class BudgetExceeded(Exception):
    """The run spent its step or token budget (kept across resumes)."""


class LeaseLost(Exception):
    """Another worker took the run over (our heartbeat stopped in time)."""


# --- graphs --------------------------------------------------------------------------------


def graph_for(spec: AgentSpec) -> Any:
    """The compiled graph of an agent version, bound to this process's checkpointer."""
    saver = checkpointer_get()
    key = (spec.name, spec.version, id(saver))
    with _graphs_lock:
        cached = _graphs.get(key)
        if cached is None or cached[0] is not spec:  # re-registered: build it again
            cached = (spec, spec.factory(checkpointer=saver))
            _graphs[key] = cached
        return cached[1]


def thread_config(run: AgentRun, *, version: str | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"configurable": {"thread_id": run.thread_id}}
    if version is not None:
        config["metadata"] = {"graph_version": version, "run_id": str(run.id)}
        config["recursion_limit"] = settings.RUN_MAX_STEPS + 5
    return config


# --- lease ---------------------------------------------------------------------------------


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def lease_acquire(*, run_id: Any, owner: str) -> AgentRun | None:
    """Take the run's lease unless another live worker holds it; None when we may not run."""
    now = timezone.now()
    with transaction.atomic():
        run = AgentRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None:
            return None
        held = run.lease_owner and run.lease_expires_at and run.lease_expires_at > now
        if held and run.lease_owner != owner:
            return None
        run.lease_owner = owner
        run.lease_expires_at = now + dt.timedelta(seconds=settings.RUN_LEASE_SECONDS)
        # Whatever asked for this advance is now being handled: we read the state after this.
        run.wake_requested = False
        run.save(update_fields=["lease_owner", "lease_expires_at", "wake_requested", "updated_at"])
    return run


def lease_release(*, run_id: Any, owner: str) -> None:
    """Give the lease back; if an advance was asked for meanwhile, queue it now."""
    with transaction.atomic():
        run = AgentRun.objects.select_for_update().filter(pk=run_id, lease_owner=owner).first()
        if run is None:
            return
        AgentRun.objects.filter(pk=run_id).update(lease_owner="", lease_expires_at=None)
        if run.wake_requested:
            # Its own task was skipped while we held the lease (lost wake-up otherwise).
            approval_services.run_advance_enqueue(run_id=run_id)


class Heartbeat:
    """Extends the lease every RUN_HEARTBEAT_SECONDS while the run advances."""

    def __init__(self, *, run_id: Any, owner: str):
        self.run_id = run_id
        self.owner = owner
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease-{run_id}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _beat(self) -> None:
        try:
            while not self._stop.wait(settings.RUN_HEARTBEAT_SECONDS):
                expires = timezone.now() + dt.timedelta(seconds=settings.RUN_LEASE_SECONDS)
                try:
                    kept = AgentRun.objects.filter(pk=self.run_id, lease_owner=self.owner).update(
                        lease_expires_at=expires
                    )
                except Exception:  # noqa: BLE001 - a blip: try again; the ledger fences effects
                    log.exception("lease heartbeat failed for run %s; retrying", self.run_id)
                    connection.close()
                    continue
                if not kept:  # another worker took the run over
                    self.lost.set()
                    return
        finally:
            connection.close()


# --- advance -------------------------------------------------------------------------------


def run_advance(*, run_id: Any) -> str:
    """Move the run as far as it can go now. Returns what happened (for logs and tests)."""
    owner = _owner()
    run = lease_acquire(run_id=run_id, owner=owner)
    if run is None:
        return "skipped: leased elsewhere or unknown"
    try:
        with Heartbeat(run_id=run.pk, owner=owner) as beat:
            return _advance(run, beat)
    except (LeaseLost, LeaseNotHeld):
        return "stopped: lease lost"
    except approval_services.RunStopped:
        fresh = AgentRun.objects.get(pk=run.pk)
        if fresh.cancel_requested:
            return _compensate_cancelled(fresh)
        return f"stopped: run is {fresh.status}"
    except Exception as exc:  # noqa: BLE001 - every failure is classified and recorded
        return _record_failure(run, exc)
    finally:
        lease_release(run_id=run.pk, owner=owner)


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
    saver = checkpointer_get()
    if saver.get_tuple(thread_config(run)) is None:
        spec = (
            agent_get(run.agent, run.graph_version)
            if agent_is_registered(run.agent, run.graph_version)
            else current
        )
        graph = graph_for(spec)
        run = approval_services.run_mark_running(run=run, resumed=False)
        return _drive(run, graph, spec.graph_input(run.input), spec.version, beat)

    resolved = _resolve_version(run, current)
    if resolved is None:
        return "flagged: version skew"
    spec, graph, migration = resolved
    state = graph.get_state(thread_config(run))
    if state.interrupts:
        resume = _sync_and_collect(run, state.interrupts)
        if not resume:
            approval_services.run_mark_waiting(run=run)
            return "waiting"
        missing = [node for node in _pending_nodes(run) if node not in graph.nodes]
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
    if state.next:
        # A worker died mid-run: continue from the last checkpoint.
        run = approval_services.run_mark_running(run=run, resumed=False)
        update = Command(update=migration) if migration else None
        return _drive(run, graph, update, spec.version, beat)
    approval_services.run_mark_completed(run=run, output=jsonable(state.values))
    return "completed"


def _resolve_version(
    run: AgentRun, current: AgentSpec
) -> tuple[AgentSpec, Any, dict | None] | None:
    """(spec, graph, state migration or None) for the thread's checkpointed version."""
    state_version = _checkpoint_version(run) or run.graph_version
    if state_version == current.version:
        return current, graph_for(current), None
    if current.policy == "migrate" and current.migrate is not None:
        graph = graph_for(current)
        snapshot = graph.get_state(thread_config(run))
        # The new graph ignores triggers of nodes it lacks, so read them off the checkpoint.
        missing = [node for node in _pending_nodes(run) if node not in graph.nodes]
        if missing:
            approval_services.run_flag(
                run=run,
                reason=f"checkpointed under v{state_version}; pending node(s) "
                f"{', '.join(missing)} do not exist in v{current.version}",
            )
            return None
        migration = current.migrate(dict(snapshot.values), state_version)
        with transaction.atomic():
            AgentRun.objects.filter(pk=run.pk).update(graph_version=current.version)
            event_record(
                action="run.migrated",
                actor=f"agent:{run.id}",
                run_id=run.id,
                data={
                    "from_version": state_version,
                    "to_version": current.version,
                    "update": jsonable(migration),
                },
            )
        run.graph_version = current.version
        return current, graph, migration
    if agent_is_registered(run.agent, state_version):
        spec = agent_get(run.agent, state_version)
        return spec, graph_for(spec), None
    approval_services.run_flag(
        run=run,
        reason=f"checkpointed under v{state_version}, which is no longer registered, "
        f"and v{current.version} has no migration",
    )
    return None


def _pending_nodes(run: AgentRun) -> list[str]:
    """Nodes the checkpoint says run next (their "branch:to:<node>" trigger is set)."""
    tup = checkpointer_get().get_tuple(thread_config(run))
    if tup is None:
        return []
    prefix = "branch:to:"
    return sorted(
        k[len(prefix) :] for k in tup.checkpoint["channel_values"] if k.startswith(prefix)
    )


def _checkpoint_version(run: AgentRun) -> str | None:
    tup = checkpointer_get().get_tuple(thread_config(run))
    return (tup.metadata or {}).get("graph_version") if tup else None


def _sync_and_collect(run: AgentRun, interrupts: Any) -> dict[str, Any]:
    """Create missing approval requests; return {interrupt_id: resume value} for decided ones."""
    items: list[dict[str, Any]] = []
    values: dict[str, Any] = {}
    for intr in interrupts:
        values[intr.id] = intr.value
        items.extend(
            protocol.approval_items(
                interrupt_id=intr.id,
                value=intr.value,
                response_schema=getattr(intr, "response_schema", None),
            )
        )
    approval_services.approval_requests_sync(run=run, requests=items)
    by_interrupt: dict[str, list[ApprovalRequest]] = {}
    for approval in run.approvals.filter(interrupt_id__in=list(values)).order_by("action_index"):
        by_interrupt.setdefault(approval.interrupt_id, []).append(approval)
    resume: dict[str, Any] = {}
    for interrupt_id, approvals in by_interrupt.items():
        if any(a.status == ApprovalRequest.Status.PENDING for a in approvals):
            continue
        decisions = [a.decision for a in approvals]
        resume[interrupt_id] = protocol.resume_value(
            value=values[interrupt_id], decisions=decisions
        )
    return resume


def _drive(run: AgentRun, graph: Any, graph_input: Any, version: str, beat: Heartbeat) -> str:
    config = thread_config(run, version=version)
    # The ledger refuses to call downstream unless this worker still holds the lease.
    config["configurable"]["lease_owner"] = beat.owner
    for update in graph.stream(graph_input, config, stream_mode="updates", durability="sync"):
        steps = sum(1 for node in update if node != "__interrupt__")
        tokens = _tokens_in(update)
        counted = AgentRun.objects.values_list("tokens_used", flat=True).get(pk=run.pk)
        # Graphs that keep a cumulative "tokens_used" in their state (it survives resumes
        # with the checkpoint) are the source of truth; the run mirrors it.
        tokens = max(tokens, _state_tokens(update) - counted)
        if steps or tokens:
            approval_services.run_budget_add(run=run, steps=steps, tokens=tokens)
        fresh = AgentRun.objects.only(
            "steps_used", "tokens_used", "cancel_requested", "lease_owner"
        ).get(pk=run.pk)
        if beat.lost.is_set():
            raise LeaseLost()
        if fresh.cancel_requested:
            return _compensate_cancelled(run)
        if fresh.steps_used > settings.RUN_MAX_STEPS:
            raise BudgetExceeded(
                f"step budget exhausted ({fresh.steps_used} > {settings.RUN_MAX_STEPS})"
            )
        if fresh.tokens_used > settings.RUN_MAX_TOKENS:
            raise BudgetExceeded(
                f"token budget exhausted ({fresh.tokens_used} > {settings.RUN_MAX_TOKENS})"
            )
    state = graph.get_state(thread_config(run))
    if state.interrupts:
        _sync_and_collect(run, state.interrupts)
        # A decision made since we took the lease set the wake flag: the lease release
        # queues the next advance.
        approval_services.run_mark_waiting(run=run)
        return "waiting"
    if state.next:
        raise RuntimeError(f"graph stopped with pending nodes {state.next} and no interrupt")
    approval_services.run_mark_completed(
        run=AgentRun.objects.get(pk=run.pk), output=jsonable(state.values)
    )
    return "completed"


def _state_tokens(update: dict[str, Any]) -> int:
    """The largest cumulative ``tokens_used`` a step wrote to the state (0 if none)."""
    values = [
        node_update["tokens_used"]
        for node_update in update.values()
        if isinstance(node_update, dict) and isinstance(node_update.get("tokens_used"), int)
    ]
    return max(values, default=0)


def _tokens_in(update: dict[str, Any]) -> int:
    """Model tokens reported by the messages (usage_metadata) a step added to the state."""
    total = 0
    for node_update in update.values():
        if not isinstance(node_update, dict):
            continue
        for value in node_update.values():
            for item in value if isinstance(value, list) else [value]:
                usage = (
                    item.usage_metadata
                    if isinstance(item, BaseMessage) and hasattr(item, "usage_metadata")
                    else None
                )
                if usage:
                    total += int(usage.get("total_tokens", 0))
    return total


# --- failures, cancel ----------------------------------------------------------------------

RETRYABLE_NAMES = {
    "RetryableToolError",
    "RateLimitError",
    "APITimeoutError",
    "APIConnectionError",
    "InternalServerError",
    "ServiceUnavailableError",
    "OperationalError",
    "InterfaceError",
    "PoolTimeout",
}


def is_retryable(exc: BaseException) -> bool:
    """429/5xx/timeouts/connection trouble are worth another try; 4xx and validation are not."""
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    if type(exc).__name__ in RETRYABLE_NAMES:
        return True
    status = getattr(exc, "status_code", None) or getattr(
        getattr(exc, "response", None), "status_code", None
    )
    return isinstance(status, int) and (status == 429 or status >= 500)


def backoff_seconds(failures: int) -> float:
    """Exponential backoff with full jitter."""
    base = min(60.0, 2.0**failures)
    return random.uniform(base / 2, base)


def _record_failure(run: AgentRun, exc: Exception) -> str:
    try:
        return _record_failure_inner(run, exc)
    except approval_services.RunStopped:
        return "stopped: the run was cancelled or finished meanwhile"


def _record_failure_inner(run: AgentRun, exc: Exception) -> str:
    run = AgentRun.objects.get(pk=run.pk)
    error = f"{type(exc).__name__}: {exc}"
    detail = "".join(traceback.format_exception(exc))[-4000:]
    retryable = is_retryable(exc) and not isinstance(exc, BudgetExceeded)
    log.warning("run %s failed (%s): %s", run.pk, "retryable" if retryable else "final", error)
    if retryable and run.failure_count + 1 < settings.RUN_MAX_FAILURES:
        delay = backoff_seconds(run.failure_count + 1)
        approval_services.run_record_failure(run=run, error=error, retry_in=delay)
        _enqueue_later(run.pk, delay)
        return f"retrying in {delay:.1f}s: {error}"
    dead = retryable or not isinstance(exc, BudgetExceeded)
    with transaction.atomic():
        approval_services.run_mark_failed(run=run, error=f"{error}\n\n{detail}", dead=dead)
        event_record(
            action="run.escalated",
            actor=f"agent:{run.pk}",
            run_id=run.pk,
            data={
                "error": error,
                "failures": run.failure_count + 1,
                "retryable": retryable,
                "agent": run.agent,
                "input": run.input,
                "traceback": detail,
            },
        )
    return f"{'dead' if dead else 'failed'}: {error}"


def _enqueue_later(run_id: Any, delay: float) -> None:
    from django_q.models import Schedule
    from django_q.tasks import schedule

    transaction.on_commit(
        lambda: schedule(
            "agents.tasks.run_advance",
            str(run_id),
            schedule_type=Schedule.ONCE,
            repeats=1,
            next_run=timezone.now() + dt.timedelta(seconds=delay),
            name=f"retry-{run_id}-{uuid.uuid4().hex[:6]}",
        )
    )


def _compensate_cancelled(run: AgentRun) -> str:
    """Undo a cancelled run's applied effects in reverse order, each exactly once."""
    from agents.ledger import CompensationFailed, run_compensate

    try:
        # Building the graph registers tools that agents declare at build time, so their
        # compensations are known in this process too.
        _graph_of_run(run)
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
                data={"error": f"compensation failed: {exc}"},
            )
        raise
    return f"cancelled: {len(undone)} effect(s) compensated"


# --- reads for the console ------------------------------------------------------------------


def jsonable(value: Any) -> Any:
    """State values as plain JSON (messages become {type, content, tool_calls})."""
    if isinstance(value, BaseMessage):
        out: dict[str, Any] = {"type": value.type, "content": value.content}
        if getattr(value, "tool_calls", None):
            out["tool_calls"] = value.tool_calls
        return jsonable(out)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "model_dump"):
        return jsonable(value.model_dump(mode="json"))
    return str(value)


def _graph_of_run(run: AgentRun) -> Any:
    version = _checkpoint_version(run) or run.graph_version
    spec = (
        agent_get(run.agent, version)
        if agent_is_registered(run.agent, version)
        else agent_get(run.agent)
    )
    return graph_for(spec)


def run_history(*, run: AgentRun) -> list[dict[str, Any]]:
    """The run's checkpoints, oldest first: node that ran, time, next nodes, values, changes."""
    graph = _graph_of_run(run)
    snapshots = list(graph.get_state_history(thread_config(run)))
    snapshots.reverse()
    steps: list[dict[str, Any]] = []
    previous: Any = None
    for snap in snapshots:
        values = jsonable(dict(snap.values or {}))
        before = jsonable(dict(previous.values or {})) if previous is not None else {}
        changed = {key: value for key, value in values.items() if before.get(key) != value}
        steps.append(
            {
                "checkpoint_id": snap.config["configurable"]["checkpoint_id"],
                "step": (snap.metadata or {}).get("step"),
                "source": (snap.metadata or {}).get("source"),
                "nodes": list(previous.next) if previous is not None else ["input"],
                "created_at": snap.created_at,
                "next": list(snap.next),
                "values": values,
                "changed": changed,
                "interrupts": [jsonable(i.value) for i in getattr(snap, "interrupts", ()) or ()],
                "interrupt_ids": [i.id for i in getattr(snap, "interrupts", ()) or ()],
            }
        )
        previous = snap
    return steps


def run_state_at(*, run: AgentRun, checkpoint_id: str) -> dict[str, Any]:
    """One step of the history; LookupError when the checkpoint is not this run's."""
    for step in run_history(run=run):
        if step["checkpoint_id"] == checkpoint_id:
            return step
    raise LookupError(f"checkpoint {checkpoint_id} is not part of run {run.pk}")


def run_fork(*, run: AgentRun, checkpoint_id: str, user: Any, request: Any = None) -> AgentRun:
    """A new run whose thread starts from the state at ``checkpoint_id`` (a new branch).

    Effects already applied by the parent are not repeated by key: the fork has its own
    thread id, so its tool calls are new actions that go through the gate again.
    """
    graph = _graph_of_run(run)
    history = run_history(run=run)
    index = next((i for i, s in enumerate(history) if s["checkpoint_id"] == checkpoint_id), None)
    if index is None:
        raise LookupError(f"checkpoint {checkpoint_id} is not part of run {run.pk}")
    snapshot = graph.get_state(
        {"configurable": {"thread_id": run.thread_id, "checkpoint_id": checkpoint_id}}
    )
    with transaction.atomic():
        child = AgentRun(
            agent=run.agent,
            graph_version=_checkpoint_version(run) or run.graph_version,
            input=run.input,
            requested_by=user,
            parent_run=run,
            forked_from_checkpoint=checkpoint_id,
        )
        child.thread_id = str(child.id)
        child.save(force_insert=True)
        event_record(
            action="run.forked",
            actor=user,
            run_id=child.id,
            request=request,
            data={
                "parent_run": str(run.pk),
                "checkpoint_id": checkpoint_id,
                "step": history[index]["step"],
                "next": list(snapshot.next),
            },
        )
        if index > 0:
            last_nodes = history[index]["nodes"]
            as_node = last_nodes[0] if last_nodes and last_nodes[0] in graph.nodes else None
            graph.update_state(
                thread_config(child, version=child.graph_version),
                dict(snapshot.values),
                as_node=as_node,
            )
        approval_services.run_advance_enqueue(run_id=child.id)
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
