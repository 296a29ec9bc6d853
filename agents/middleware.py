"""Kept for agent authors (the README documents it): see ``agents.hitl``."""

from agents.hitl.console_tool import ToolRisk, console_tool, tool_adapt
from agents.hitl.middleware import (
    ApprovalGateMiddleware,
    ConsoleGateMiddleware,
    GateRule,
    gate_decision,
)

__all__ = [
    "ApprovalGateMiddleware",
    "ConsoleGateMiddleware",
    "GateRule",
    "ToolRisk",
    "console_tool",
    "gate_decision",
    "tool_adapt",
]
