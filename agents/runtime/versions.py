"""Which graph a thread resumes under (invariant 8: no silent resume).

The graph version stored in the checkpoint's metadata picks the graph, by the agent's policy:
``drain`` keeps running the old version (it must stay registered), ``migrate`` runs the current
version after transforming the state. A thread whose pending node no longer exists is flagged.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from agents.runtime.checkpoint import checkpointer_get, graph_for, jsonable, thread_config
from agents.runtime.registry import AgentSpec, agent_get, agent_is_registered
from approvals import services as approval_services
from approvals.models import AgentRun
from audit.services import event_record
from core.sealed_fields import field_seal


def checkpoint_version(run: AgentRun) -> str | None:
    """The graph version the thread's newest checkpoint was written under."""
    tup = checkpointer_get().get_tuple(thread_config(run))
    return (tup.metadata or {}).get("graph_version") if tup else None


def pending_nodes(run: AgentRun) -> list[str]:
    """Nodes the checkpoint says run next (their "branch:to:<node>" trigger is set)."""
    tup = checkpointer_get().get_tuple(thread_config(run))
    if tup is None:
        return []
    prefix = "branch:to:"
    return sorted(
        k[len(prefix) :] for k in tup.checkpoint["channel_values"] if k.startswith(prefix)
    )


def missing_nodes(run: AgentRun, graph: Any) -> list[str]:
    """Pending nodes of the thread that ``graph`` does not have."""
    return [node for node in pending_nodes(run) if node not in graph.nodes]


def graph_of_run(run: AgentRun) -> Any:
    """The graph of the version the thread was checkpointed under (else the current one)."""
    version = checkpoint_version(run) or run.graph_version
    spec = (
        agent_get(run.agent, version)
        if agent_is_registered(run.agent, version)
        else agent_get(run.agent)
    )
    return graph_for(spec)


def version_resolve(run: AgentRun, current: AgentSpec) -> tuple[AgentSpec, Any, dict | None] | None:
    """(spec, graph, state migration or None) for the thread; None when the run was flagged."""
    state_version = checkpoint_version(run) or run.graph_version
    if state_version == current.version:
        if run.pending_migration is not None:  # applied by the resume that wrote this checkpoint
            AgentRun.objects.filter(pk=run.pk).update(pending_migration=None)
            run.pending_migration = None
        return current, graph_for(current), None
    if current.policy == "migrate" and current.migrate is not None:
        graph = graph_for(current)
        # The new graph ignores triggers of nodes it lacks, so read them off the checkpoint.
        missing = missing_nodes(run, graph)
        if missing:
            approval_services.run_flag(
                run=run,
                reason=f"checkpointed under v{state_version}; pending node(s) "
                f"{', '.join(missing)} do not exist in v{current.version}",
            )
            return None
        if run.graph_version == current.version and run.pending_migration is not None:
            # Migrated once already (a waiting run is advanced again before its resume).
            return current, graph, run.pending_migration
        snapshot = graph.get_state(thread_config(run))
        migration = current.migrate(dict(snapshot.values), state_version)
        stored = jsonable(migration)  # kept as JSON (and audited) until the resume applies it
        with transaction.atomic():
            AgentRun.objects.filter(pk=run.pk).update(
                graph_version=current.version,
                pending_migration=field_seal(AgentRun, "pending_migration", run.pk, stored),
            )
            event_record(
                action="run.migrated",
                actor=f"agent:{run.id}",
                run_id=run.id,
                data={"from_version": state_version, "to_version": current.version},
                private={"update": stored},
            )
        run.graph_version = current.version
        run.pending_migration = stored
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
