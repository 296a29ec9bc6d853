"""What happens if a reviewer rejects a call: the line the payload carries as ``on_deny``.

Two parts: what the tool declares a rejection means for the world (``ToolSpec.on_deny``, with
the call's args), then what the run does next, which depends on the path that asked. What each
path really does after a reject:

- the middlewares (``ConsoleGateMiddleware``, ``ApprovalGateMiddleware``) answer the model with
  a tool message saying who rejected it and why, and the agent takes its next turn;
- LangChain's ``HumanInTheLoopMiddleware`` (the HITL protocol) does the same with its own
  message ("User rejected the tool call ... with reason: ..."); in ``batched`` mode the other
  actions of the request go ahead as their own decisions say;
- a graph calling ``approval_gate`` gets the decision back and routes on it: only the graph
  knows, so it passes ``on_deny=`` (the incident copilot does); otherwise the line says so.
"""

from __future__ import annotations

from typing import Any

from agents.tools import ToolSpec

# The agent loop (both console middlewares): the model hears the rejection and goes on.
AGENT_GOES_ON = (
    "The tool is not called; the agent is told you rejected it (with your reason) and the run "
    "goes on without this action."
)
# LangChain's HumanInTheLoopMiddleware, per_call and batched.
HITL_GOES_ON = (
    "The tool is not called; the agent is told it was rejected (with your reason) and the run "
    "goes on without this action."
)
HITL_BATCH = " The other actions of the same request still go ahead as their own decisions say."
# A graph that calls approval_gate without saying what it does next.
GRAPH_DECIDES = (
    "The tool is not called; the agent's graph gets your decision (with your reason) and "
    "takes its own next step."
)


def on_deny_line(spec: ToolSpec | None, args: dict[str, Any], *, then: str) -> str:
    """The tool's declared meaning of a rejection (if any), then what the run does next."""
    declared = spec.describe_on_deny(args).strip() if spec is not None else ""
    return " ".join(part for part in (declared, then.strip()) if part)
