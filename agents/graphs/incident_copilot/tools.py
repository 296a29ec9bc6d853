"""The tools the incident copilot uses, as the model sees them."""

from __future__ import annotations

from typing import Any

from agents.tools import tool_get

READ_TOOLS = ("fetch_metrics", "search_logs", "list_recent_deploys")
ACTION_TOOLS = ("create_incident_ticket", "rollback_deploy")
NOTIFY_TOOL = "notify_channel"


def tool_definitions(names: tuple[str, ...]) -> list[dict[str, Any]]:
    """OpenAI-style tool definitions from the registry (the args schema is the one source)."""
    definitions = []
    for name in names:
        spec = tool_get(name)
        definitions.append(
            {
                "type": "function",
                "function": {
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": spec.args_schema(),
                },
            }
        )
    return definitions
