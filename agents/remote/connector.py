"""The LangGraph Agent Server connector: a schedule (``agents.tasks.connectors_poll``) reads
each active connector's interrupted threads with ``langgraph_sdk``, opens an approval request
per pending interrupt (idempotent: ``remote_request_open``), then resumes the threads whose
requests are decided (``agents.remote.connector_resume``, also called from the run's advance).

Each pass is bounded and starves no thread: per graph it reads one page of interrupted threads
(oldest first) from a stored offset, sized for the threads already known (waiting on people)
plus ``max_threads`` new ones; known interrupts are skipped without counting, at most
``max_threads`` new threads are tried, and a pass that opened nothing moves the offset past
what it read (back to the oldest only once it read to the end), so refused or poison threads
cannot hold it either, however many threads the console believes still wait.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.utils import timezone

from agents.remote.connector_models import AgentServerConnector, ConnectorResume
from agents.remote.connector_resume import (
    connector_client,
    connector_resume_decided,
    public_url,
    redacted,
    thread_interrupts,
)
from agents.remote.models import RemoteRequest
from agents.remote.services import remote_request_open
from core.errors import ApplicationError

# The Agent Server's largest page for threads.search.
SEARCH_LIMIT = 1000


def connectors_poll() -> dict[str, dict[str, Any]]:
    """One pass over every active connector (the schedule's task); never raises."""
    connectors = AgentServerConnector.objects.filter(is_active=True).select_related("agent")
    return {c.name: connector_poll(connector=c) for c in connectors}


def connector_poll(*, connector: AgentServerConnector) -> dict[str, Any]:
    """Open requests for the connector's interrupted threads, then resume the decided ones.
    Errors are kept on the connector (``last_error``), never raised."""
    opened, resumed, errors = 0, 0, []
    offsets = dict(connector.poll_offsets or {})
    try:
        if not connector.agent.is_active:
            raise ApplicationError(f"agent {connector.agent.name!r} is not active")
        client = connector_client(connector)
        # The threads already known still wait on people: each page is that much longer.
        limit = min(connector.max_threads + _known_waiting(connector), SEARCH_LIMIT)
        for graph_id in map(str, connector.graph_ids or []):
            graph_opened, offsets[graph_id] = _poll_graph(
                client, connector, graph_id, offsets.get(graph_id, 0), limit, errors
            )
            opened += graph_opened
        resumed, resume_errors = connector_resume_decided(connector=connector, client=client)
        errors.extend(resume_errors)
    except Exception as exc:  # the schedule goes on for the other connectors
        errors.append(f"{type(exc).__name__}: {exc}")
    AgentServerConnector.objects.filter(pk=connector.pk).update(
        last_polled_at=timezone.now(),
        last_error=redacted(connector, "\n".join(errors)),
        poll_offsets={str(g): offsets.get(str(g), 0) for g in connector.graph_ids or []},
    )
    return {"opened": opened, "resumed": resumed, "errors": len(errors)}


def _poll_graph(
    client: Any,
    connector: AgentServerConnector,
    graph_id: str,
    offset: int,
    limit: int,
    errors: list[str],
) -> tuple[int, int]:
    """Open the new interrupts of one page of the graph's interrupted threads; (opened, the
    offset for the next pass)."""
    key = "assistant_id" if _is_uuid(graph_id) else "graph_id"
    threads = client.threads.search(
        status="interrupted",
        metadata={key: graph_id},
        limit=limit,
        sort_by="updated_at",
        sort_order="asc",
        **({"offset": offset} if offset else {}),  # 0 is the server's default
    )
    known = set(
        RemoteRequest.objects.filter(
            agent=connector.agent, thread_id__in=[str(t["thread_id"]) for t in threads]
        ).values_list("thread_id", "interrupt_id")
    )
    opened, tried, seen = 0, 0, 0
    for thread in threads:
        if tried >= connector.max_threads:
            break
        seen += 1
        thread_id = str(thread["thread_id"])
        new = [i for i in thread_interrupts(thread) if (thread_id, str(i["id"])) not in known]
        tried += bool(new)
        for interrupt in new:
            try:
                _, created = remote_request_open(
                    agent=connector.agent,
                    thread_id=thread_id,
                    interrupt_id=str(interrupt["id"]),
                    value=interrupt.get("value"),
                    run_input=_run_input(connector, thread),
                )
                opened += int(created)
            except ApplicationError as exc:
                errors.append(f"thread {thread_id}: {exc}")
    if seen == len(threads) < limit:
        return opened, 0  # read to the end: the next pass starts again from the oldest
    # Nothing opened (known, refused or poison threads, or the tries ran out on refused ones
    # before the end): the next pass reads on from past them.
    return opened, offset if opened else offset + max(seen, 1)


def _known_waiting(connector: AgentServerConnector) -> int:
    """Threads of the connector's agent still waiting on an interrupt the console knows: a
    request pending, or decided or cancelled and not yet told (its resume not delivered). A
    delivered one (or one whose thread is gone) waits no more."""
    return (
        RemoteRequest.objects.filter(agent=connector.agent)
        .exclude(connector_resume__status=ConnectorResume.Status.DELIVERED)
        .values("thread_id")
        .distinct()
        .count()
    )


def _run_input(connector: AgentServerConnector, thread: dict[str, Any]) -> dict[str, Any]:
    metadata = thread.get("metadata") or {}
    return {
        "agent_server": public_url(connector.url),
        "thread_id": str(thread["thread_id"]),
        "graph_id": str(metadata.get("graph_id") or ""),
    }


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
