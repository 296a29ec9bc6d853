"""The tool registry (see ``registry``): name, args schema, tier, blast radius, compensation."""

from agents.tools.registry import (
    TIER_LEVEL,
    TIERS,
    ToolFunc,
    ToolSpec,
    UnknownTool,
    tool_find,
    tool_get,
    tool_list,
    tool_register,
    tool_unregister,
    validation_errors,
)

__all__ = [
    "TIERS",
    "TIER_LEVEL",
    "ToolFunc",
    "ToolSpec",
    "UnknownTool",
    "tool_find",
    "tool_get",
    "tool_list",
    "tool_register",
    "tool_unregister",
    "validation_errors",
]
