"""The LangGraph Agent Server connector: a schedule (``agents.tasks.connectors_poll``) reads
each active connector's interrupted threads with ``langgraph_sdk``, opens an approval request
per pending interrupt (idempotent: ``remote_request_open``), then resumes the threads whose
requests are decided (``agents.remote.connector_resume``, also called from the run's advance).
"""

from __future__ import annotations

import uuid
from typing import Any

from django.utils import timezone

from agents.remote.connector_models import AgentServerConnector
from agents.remote.connector_resume import (
    ERROR_CHARS,
    connector_client,
    connector_resume_decided,
    thread_interrupts,
)
from agents.remote.services import remote_request_open
from core.errors import ApplicationError


def connectors_poll() -> dict[str, dict[str, Any]]:
    """One pass over every active connector (the schedule's task); never raises."""
    connectors = AgentServerConnector.objects.filter(is_active=True).select_related("agent")
    return {c.name: connector_poll(connector=c) for c in connectors}


def connector_poll(*, connector: AgentServerConnector) -> dict[str, Any]:
    """Open requests for the connector's interrupted threads, then resume the decided ones.
    Errors are kept on the connector (``last_error``), never raised."""
    opened, resumed, errors = 0, 0, []
    try:
        if not connector.agent.is_active:
            raise ApplicationError(f"agent {connector.agent.name!r} is not active")
        client = connector_client(connector)
        for thread in _interrupted_threads(client, connector):
            for interrupt in thread_interrupts(thread):
                try:
                    _, created = remote_request_open(
                        agent=connector.agent,
                        thread_id=str(thread["thread_id"]),
                        interrupt_id=str(interrupt["id"]),
                        value=interrupt.get("value"),
                        run_input=_run_input(connector, thread),
                    )
                    opened += int(created)
                except ApplicationError as exc:
                    errors.append(f"thread {thread['thread_id']}: {exc}")
        resumed, resume_errors = connector_resume_decided(connector=connector, client=client)
        errors.extend(resume_errors)
    except Exception as exc:  # the schedule goes on for the other connectors
        errors.append(f"{type(exc).__name__}: {exc}")
    AgentServerConnector.objects.filter(pk=connector.pk).update(
        last_polled_at=timezone.now(), last_error="\n".join(errors)[:ERROR_CHARS]
    )
    return {"opened": opened, "resumed": resumed, "errors": len(errors)}


def _interrupted_threads(client: Any, connector: AgentServerConnector) -> list[dict[str, Any]]:
    """Interrupted threads of the connector's graphs, oldest first, at most ``max_threads``."""
    found: dict[str, dict[str, Any]] = {}
    for graph_id in connector.graph_ids or []:
        remaining = connector.max_threads - len(found)
        if remaining <= 0:
            break
        key = "assistant_id" if _is_uuid(str(graph_id)) else "graph_id"
        for thread in client.threads.search(
            status="interrupted",
            metadata={key: str(graph_id)},
            limit=remaining,
            sort_by="updated_at",
            sort_order="asc",
        ):
            found.setdefault(str(thread["thread_id"]), thread)
    return list(found.values())[: connector.max_threads]


def _run_input(connector: AgentServerConnector, thread: dict[str, Any]) -> dict[str, Any]:
    metadata = thread.get("metadata") or {}
    return {
        "agent_server": connector.url,
        "thread_id": str(thread["thread_id"]),
        "graph_id": str(metadata.get("graph_id") or ""),
    }


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
