"""The public way in for agent authors: the policy gate, the middleware, declared tools.

- ``approval_gate``: call it in a node before a side effect; it pauses for a person.
- ``ConsoleGateMiddleware``: put it in ``create_agent(middleware=[...])`` to govern every tool
  call by the console's policy; ``console_tool`` / ``ToolRisk`` declare a tool's tier.
- ``protocol``: LangChain HITL payloads (``HITLRequest``, ``ToolApprovalRequest``) understood
  by the console.
"""

from agents.hitl.console_tool import ToolRisk, console_tool, tool_adapt
from agents.hitl.gate import DecisionError, approval_gate, gate_payload
from agents.hitl.middleware import (
    ApprovalGateMiddleware,
    ConsoleGateMiddleware,
    GateRule,
    gate_decision,
)

__all__ = [
    "ApprovalGateMiddleware",
    "ConsoleGateMiddleware",
    "DecisionError",
    "GateRule",
    "ToolRisk",
    "approval_gate",
    "console_tool",
    "gate_decision",
    "gate_payload",
    "tool_adapt",
]
