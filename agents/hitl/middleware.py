"""Agent middleware that puts the console's policy gate in front of tool calls.

Both work like LangChain's ``HumanInTheLoopMiddleware`` in ``per_call`` mode (one interrupt
per gated tool call, raised as the call starts, answered by interrupt id), but the interrupt is
``agents.hitl.gate.approval_gate``'s payload, so the console's policy, tiers, blast radius and
expiry apply to ``create_agent`` graphs too.

- ``ConsoleGateMiddleware`` is the public one, for your own agents: which calls wait for a
  person comes from the console's tiers and tool policies (no ``interrupt_on``), and every tool
  with side effects runs through the effects ledger, exactly once per tool call.
- ``ApprovalGateMiddleware`` gates the tools named in ``gated`` and leaves execution to the
  tool (the built-in refund agent runs its own saga through the ledger).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
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
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import ValidationError

from agents.effects.errors import RetryableToolError, ToolError
from agents.effects.ledger import effect_execute
from agents.hitl.console_tool import DEFAULT_TIER, ToolRisk, tool_adapt, tool_is_adapted
from agents.hitl.gate import approval_gate
from agents.hitl.on_deny import AGENT_GOES_ON
from agents.runtime.llm import message_text
from agents.tools import ToolSpec, tool_find, tool_get
from approvals import policy

# What a tool call answers, and the next handler in LangChain's middleware chain.
CallResult = ToolMessage | Command[Any]
Handler = Callable[[ToolCallRequest], CallResult]
# tool name -> True (always gate) or a predicate on the call's validated args.
GateRule = bool | Callable[[dict[str, Any]], bool]
# (agent state, tool call) -> the agent's stated confidence in this call (0-1), or None.
ConfidenceHook = Callable[[dict[str, Any], Any], float | None]
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


class _GateMiddlewareBase(AgentMiddleware[GateState, Any, Any]):
    """What both gate middlewares share: the proposal time stamp and the tool-call wrapper."""

    state_schema = GateState
    confidence: ConfidenceHook | None = None

    def _stamps(self, name: str) -> bool:
        """Whether calls of this tool get a proposal time (the gate payload needs one)."""
        return True

    def after_model(self, state: GateState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        last = next((m for m in reversed(state["messages"]) if isinstance(m, AIMessage)), None)
        if last is None or not last.tool_calls:
            return None
        stamped = dict(state.get("gate_requested_at") or {})
        new = {
            call["id"]: timezone.now().isoformat()
            for call in last.tool_calls
            if self._stamps(call["name"]) and call.get("id") and call["id"] not in stamped
        }
        return {"gate_requested_at": {**stamped, **new}} if new else None

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Handler,
    ) -> CallResult:
        try:
            return self._governed_call(request, handler)
        finally:
            # Tool calls run in a helper thread, which opened its own database connection.
            if threading.current_thread() is not threading.main_thread():
                connections.close_all()

    # What each middleware decides: which spec governs a call, whether it waits for a person,
    # and how an approved call runs.

    def _governing_spec(self, request: ToolCallRequest) -> ToolSpec | None:
        """The registered tool that governs this call; None leaves the call alone."""
        return None

    def _is_gated(self, spec: ToolSpec, args: dict[str, Any]) -> bool:
        """Whether this call (validated args) waits for the gate."""
        return True

    def _run_approved(
        self,
        request: ToolCallRequest,
        handler: Handler,
        spec: ToolSpec,
        decision: dict[str, Any],
    ) -> CallResult:
        """Default: the tool itself runs with the approved args and sees the decision."""
        call = request.tool_call
        state = request.state if isinstance(request.state, dict) else {}
        approved_call = {**call, "args": decision["args"]}
        view = {**state, DECISIONS_KEY: {call["id"]: decision}}
        return handler(request.override(tool_call=approved_call, state=view))

    def _governed_call(
        self,
        request: ToolCallRequest,
        handler: Handler,
    ) -> CallResult:
        call = request.tool_call
        spec = self._governing_spec(request)
        if spec is None:
            return handler(request)  # not governed here (ToolNode reports unknown tools)
        try:
            args = spec.validate(call["args"])
        except ValidationError as exc:
            return _tool_message(call, f"Invalid arguments, the tool did not run: {exc}", "error")
        if not self._is_gated(spec, args):
            return handler(request)
        state = request.state if isinstance(request.state, dict) else {}
        thread_id = str(get_config()["configurable"]["thread_id"])
        decision = approval_gate(
            tool=spec.name,
            args=args,
            rationale=_rationale(state),
            evidence=_evidence(state),
            requested_at=(state.get("gate_requested_at") or {}).get(call["id"]),
            on_deny=AGENT_GOES_ON,  # what _answer below does: the model hears it and goes on
            # The ledger key the approved call runs under (here or in the tool's own saga).
            key=f"{thread_id}:{call['id']}" if call.get("id") else None,
            confidence=self.confidence(state, call) if self.confidence else None,
        )
        if decision["decision"] in ("reject", "respond"):
            return _answer(call, decision)
        return _edit_noted(self._run_approved(request, handler, spec, decision), decision)


class ApprovalGateMiddleware(_GateMiddlewareBase):
    """Ask ``approval_gate`` before each gated tool call runs; run it only on approve/edit."""

    def __init__(
        self, gated: dict[str, GateRule], *, confidence: ConfidenceHook | None = None
    ) -> None:
        super().__init__()
        self.gated = gated
        self.confidence = confidence

    def _stamps(self, name: str) -> bool:
        return name in self.gated

    def _governing_spec(self, request: ToolCallRequest) -> ToolSpec | None:
        name = request.tool_call["name"]
        return tool_get(name) if name in self.gated else None

    def _is_gated(self, spec: ToolSpec, args: dict[str, Any]) -> bool:
        rule = self.gated.get(spec.name, False)
        return rule(args) if callable(rule) else bool(rule)


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


class ConsoleGateMiddleware(_GateMiddlewareBase):
    """Govern a ``create_agent`` agent's tool calls by the console's policy.

    Before each tool call: its tier comes from ``approvals.policy.tier_for_call`` (the tool's
    declared tier, see ``console_tool`` and ``risk``, else ``default_tier``); a tier that
    requires approval pauses the call with the console's payload (tier, rationale from the
    model's message, evidence from the conversation, blast radius, args schema). Approved or
    edited calls of tools with side effects run through the effects ledger with the key
    ``f"{thread_id}:{tool_call_id}"`` and exactly the approved args; ``read`` tools run as
    they are. Rejections and responses reach the model as tool messages.

    ``tools`` are registered with the console when the middleware is built (pass the same
    list you give ``create_agent``); a tool first seen at call time is registered then.

    ``confidence``: ``fn(state, tool_call) -> float | None``, the agent's stated confidence in
    a call; the reviewer sees it, and an autonomy rule's threshold asks a person below it.
    """

    def __init__(
        self,
        *,
        tools: Sequence[BaseTool] = (),
        risk: Mapping[str, ToolRisk | str] | None = None,
        default_tier: str = DEFAULT_TIER,
        confidence: ConfidenceHook | None = None,
    ) -> None:
        super().__init__()
        self.default_tier = default_tier
        self.confidence = confidence
        self.risk = {
            name: value if isinstance(value, ToolRisk) else ToolRisk(tier=value)
            for name, value in (risk or {}).items()
        }
        for tool in tools:
            self._spec(tool.name, tool)

    def _spec(self, name: str, tool: BaseTool | None) -> ToolSpec | None:
        if tool is None:
            return tool_find(name) if tool_is_adapted(name) else None
        declared = self.risk.get(name)
        return tool_adapt(
            tool,
            risk=declared or ToolRisk(tier=self.default_tier),
            replace=declared is not None,
        )

    def _governing_spec(self, request: ToolCallRequest) -> ToolSpec | None:
        return self._spec(request.tool_call["name"], request.tool)

    def _is_gated(self, spec: ToolSpec, args: dict[str, Any]) -> bool:
        tier = policy.tier_for_call(tool=spec.name, args=args, default_tier=spec.tier)
        return spec.has_side_effects or policy.tier_requires_approval(tier)

    def _run_approved(
        self,
        request: ToolCallRequest,
        handler: Handler,
        spec: ToolSpec,
        decision: dict[str, Any],
    ) -> CallResult:
        if not spec.has_side_effects:
            return super()._run_approved(request, handler, spec, decision)
        return self._through_ledger(request.tool_call, decision)

    def _through_ledger(self, call: Any, decision: dict[str, Any]) -> ToolMessage:
        thread_id = str(get_config()["configurable"]["thread_id"])
        try:
            result = effect_execute(
                run_id=thread_id,
                key=f"{thread_id}:{call['id']}",
                tool=call["name"],
                args=decision["args"],
                approval_id=decision["approval_id"],
            )
        except RetryableToolError:
            raise  # the runner retries the run; the ledger key keeps the effect single
        except ToolError as exc:
            return _tool_message(call, f"{call['name']} failed: {exc}", "error")
        output = result.get("output") if isinstance(result, dict) else result
        content = output if isinstance(output, str) else json.dumps(output, sort_keys=True)
        return _tool_message(call, content, "success")


def _answer(call: Any, decision: dict[str, Any]) -> ToolMessage:
    """What the model hears instead of the tool's result after a reject or a response."""
    if decision["decision"] == "respond":
        return _tool_message(call, decision["message"], "success")
    reason = f" Reason: {decision['message']}" if decision["message"] else ""
    return _tool_message(
        call,
        f"{decision['by'] or 'A reviewer'} rejected {call['name']}; it did not run. "
        f"Do not retry it unless asked.{reason}",
        "error",
    )


def _edit_noted(
    result: ToolMessage | Command[Any], decision: dict[str, Any]
) -> ToolMessage | Command[Any]:
    if decision["decision"] != "edit" or not isinstance(result, ToolMessage):
        return result
    note = (
        f"A reviewer edited this call before it ran; it ran with "
        f"{json.dumps(decision['args'], sort_keys=True)}.\n"
    )
    return result.model_copy(update={"content": note + message_text(result)})
