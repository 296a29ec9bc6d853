"""Writes for Agent Server connectors (the admin calls these): save and delete, each audited as
``agent_server_connector.changed`` with the connector's state, never its API key."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from agents.remote.connector_models import AgentServerConnector
from agents.remote.connector_resume import public_url
from audit.services import event_record


def connector_state(connector: AgentServerConnector) -> dict[str, Any]:
    """What the audit keeps of a connector: whether it has a key, never the key (nor a
    password in its URL)."""
    return {
        "name": connector.name,
        "url": public_url(connector.url),
        "graph_ids": list(connector.graph_ids or []),
        "agent": connector.agent.name if connector.agent_id else None,
        "is_active": connector.is_active,
        "max_threads": connector.max_threads,
        "api_key_set": bool(connector.api_key),
    }


def connector_save(
    *, connector: AgentServerConnector, actor: Any, change: str = "", request: Any = None
) -> AgentServerConnector:
    with transaction.atomic():
        created = connector.pk is None
        connector.save()
        event_record(
            action="agent_server_connector.changed",
            actor=actor,
            data={
                "change": change or ("created" if created else "changed"),
                "state": connector_state(connector),
            },
            request=request,
        )
    return connector


def connector_delete(*, connector: AgentServerConnector, actor: Any, request: Any = None) -> None:
    with transaction.atomic():
        state = connector_state(connector)
        connector.delete()
        event_record(
            action="agent_server_connector.changed",
            actor=actor,
            data={"change": "deleted", "state": state},
            request=request,
        )
