"""Agent middleware that puts the console's policy gate in front of tool calls.

Works like LangChain's ``HumanInTheLoopMiddleware`` in ``per_call`` mode (one interrupt per
gated tool call, raised as the call starts, answered by interrupt id), but the interrupt is
``agents.gate.approval_gate``'s payload, so the console's policy, tiers, blast radius and
expiry apply to ``create_agent`` graphs too.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Annotated, Any, NotRequired

from django.db import connections
from django.utils import timezone
from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    PrivateStateAttr,
    ToolCallRequest,
)
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import ValidationError

from agents.gate import approval_gate
from agents.llm import message_text
from agents.tools import tool_get

# tool name -> True (always gate) or a predicate on the call's validated args.
GateRule = bool | Callable[[dict[str, Any]], bool]
DECISIONS_KEY = "gate_decisions"


class GateState(AgentState[Any]):
    gate_requested_at: NotRequired[Annotated[dict[str, str], PrivateStateAttr]]
    """tool_call_id -> ISO time the call was proposed; fixed after the model turn, so the gate
    payload is identical when the tools node re-runs on resume."""

    gate_decisions: NotRequired[Annotated[dict[str, dict[str, Any]], PrivateStateAttr]]
    """tool_call_id -> the gate's decision; only in the state view handed to the approved tool
    (never written to the checkpoint), so the tool can bind its effects to the approval."""


def gate_decision(state: Any, tool_call_id: str | None) -> dict[str, Any] | None:
    """The decision the middleware attached for this tool call (None when it was not gated)."""
    if not tool_call_id or not isinstance(state, dict):
        return None
    return (state.get(DECISIONS_KEY) or {}).get(tool_call_id)


class ApprovalGateMiddleware(AgentMiddleware[GateState, Any, Any]):
    """Ask ``approval_gate`` before each gated tool call runs; run it only on approve/edit."""

    state_schema = GateState

    def __init__(self, gated: dict[str, GateRule]) -> None:
        super().__init__()
        self.gated = gated

    def _is_gated(self, name: str, args: dict[str, Any]) -> bool:
        rule = self.gated.get(name, False)
        return rule(args) if callable(rule) else bool(rule)

    def after_model(self, state: GateState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        last = next((m for m in reversed(state["messages"]) if isinstance(m, AIMessage)), None)
        if last is None or not last.tool_calls:
            return None
        stamped = dict(state.get("gate_requested_at") or {})
        new = {
            call["id"]: timezone.now().isoformat()
            for call in last.tool_calls
            if call["name"] in self.gated and call.get("id") and call["id"] not in stamped
        }
        if not new:
            return None
        return {"gate_requested_at": {**stamped, **new}}

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        try:
            return self._gated_call(request, handler)
        finally:
            # Tool calls run in a helper thread, which opened its own database connection.
            if threading.current_thread() is not threading.main_thread():
                connections.close_all()

    def _gated_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        call = request.tool_call
        name = call["name"]
        if name not in self.gated:
            return handler(request)
        try:
            args = tool_get(name).validate(call["args"])
        except ValidationError as exc:
            return _tool_message(call, f"Invalid arguments, the tool did not run: {exc}", "error")
        if not self._is_gated(name, args):
            return handler(request)
        state = request.state if isinstance(request.state, dict) else {}
        decision = approval_gate(
            tool=name,
            args=args,
            rationale=_rationale(state),
            evidence=_evidence(state),
            requested_at=(state.get("gate_requested_at") or {}).get(call["id"]),
        )
        if decision["decision"] == "reject":
            reason = f" Reason: {decision['message']}" if decision["message"] else ""
            return _tool_message(
                call,
                f"{decision['by'] or 'A reviewer'} rejected {name}; it did not run. "
                f"Do not retry it unless asked.{reason}",
                "error",
            )
        if decision["decision"] == "respond":
            return _tool_message(call, decision["message"], "success")
        approved_call = {**call, "args": decision["args"]}
        view = {**state, DECISIONS_KEY: {call["id"]: decision}}
        result = handler(request.override(tool_call=approved_call, state=view))
        if decision["decision"] == "edit" and isinstance(result, ToolMessage):
            note = (
                f"A reviewer edited this call before it ran; it ran with "
                f"{json.dumps(decision['args'], sort_keys=True)}.\n"
            )
            result = result.model_copy(update={"content": note + message_text(result)})
        return result


def _tool_message(call: Any, content: str, status: str) -> ToolMessage:
    return ToolMessage(content=content, name=call["name"], tool_call_id=call["id"], status=status)


def _rationale(state: dict[str, Any]) -> str:
    last = next((m for m in reversed(state.get("messages", [])) if isinstance(m, AIMessage)), None)
    return message_text(last) if last else ""


def _evidence(state: dict[str, Any]) -> list[str]:
    evidence = []
    for message in state.get("messages", []):
        if isinstance(message, HumanMessage):
            # The first line is the person's words; the rest repeats the input as JSON.
            evidence.append(f"request: {message_text(message).strip().splitlines()[0]}")
        elif isinstance(message, ToolMessage):
            evidence.append(f"{message.name}: {message_text(message)}")
    return evidence
