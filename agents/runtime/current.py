"""What the registries say now, for approvals/changes.py (registered in ``AgentsConfig.ready``):
the agent's current version and the tool's current args schema."""

from __future__ import annotations

from agents.runtime.registry import UnknownAgent, agent_get
from agents.tools import tool_find
from approvals.changes import Current


def registry_current(*, agent: str, tool: str) -> Current:
    """None for an agent or tool this process does not know."""
    try:
        version: str | None = agent_get(agent).version
    except UnknownAgent:
        version = None
    spec = tool_find(tool)
    return Current(agent_version=version, args_schema=spec.args_schema() if spec else None)
