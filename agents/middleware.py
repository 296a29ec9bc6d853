"""Agent middleware that puts the console's policy gate in front of tool calls.

Both work like LangChain's ``HumanInTheLoopMiddleware`` in ``per_call`` mode (one interrupt
per gated tool call, raised as the call starts, answered by interrupt id), but the interrupt is
``agents.gate.approval_gate``'s payload, so the console's policy, tiers, blast radius and
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
from dataclasses import dataclass
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
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from agents.gate import approval_gate
from agents.ledger import RetryableToolError, ToolError, effect_execute
from agents.llm import message_text
from agents.tools import ToolFunc, ToolSpec, tool_find, tool_get, tool_register
from approvals import policy

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


class _GateMiddlewareBase(AgentMiddleware[GateState, Any, Any]):
    """What both gate middlewares share: the proposal time stamp and the tool-call wrapper."""

    state_schema = GateState

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
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        try:
            return self._governed_call(request, handler)  # each subclass decides its gating
        finally:
            # Tool calls run in a helper thread, which opened its own database connection.
            if threading.current_thread() is not threading.main_thread():
                connections.close_all()


class ApprovalGateMiddleware(_GateMiddlewareBase):
    """Ask ``approval_gate`` before each gated tool call runs; run it only on approve/edit."""

    def __init__(self, gated: dict[str, GateRule]) -> None:
        super().__init__()
        self.gated = gated

    def _is_gated(self, name: str, args: dict[str, Any]) -> bool:
        rule = self.gated.get(name, False)
        return rule(args) if callable(rule) else bool(rule)

    def _stamps(self, name: str) -> bool:
        return name in self.gated

    def _governed_call(
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
        if decision["decision"] in ("reject", "respond"):
            return _answer(call, decision)
        approved_call = {**call, "args": decision["args"]}
        view = {**state, DECISIONS_KEY: {call["id"]: decision}}
        return _edit_noted(handler(request.override(tool_call=approved_call, state=view)), decision)


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


# --- the public middleware: bring your own agent -----------------------------------------------

IDEMPOTENCY_ARG = "idempotency_key"
DEFAULT_TIER = "write"


@dataclass(frozen=True)
class ToolRisk:
    """What the console needs to know about one of your tools, declared in code."""

    tier: str = DEFAULT_TIER
    """Default risk tier (read, write, critical); a ToolPolicy in the admin overrides it."""

    blast_radius: str = ""
    """One line saying what the call touches; ``{arg}`` placeholders take the call's args."""


_adapted: dict[str, BaseTool] = {}
_adapted_lock = threading.Lock()


def console_tool(
    *, tier: str = DEFAULT_TIER, blast_radius: str = ""
) -> Callable[[BaseTool], BaseTool]:
    """Decorator (over ``@tool``) declaring a tool's tier and blast radius to the console.

    The tool is registered in ``agents.tools`` when its module is imported, so policies,
    the ledger and compensation find it in every process, and is returned unchanged.
    """

    def declare(tool: BaseTool) -> BaseTool:
        tool_adapt(tool, risk=ToolRisk(tier=tier, blast_radius=blast_radius), replace=True)
        return tool

    return declare


def tool_adapt(tool: BaseTool, *, risk: ToolRisk | None = None, replace: bool = False) -> ToolSpec:
    """Register a LangChain tool as a console ``ToolSpec`` (args model from its schema).

    The spec's ``run`` invokes the tool with the approved args, plus the ledger's idempotency
    key as ``idempotency_key`` when the tool declares that argument (hide it from the model
    with ``Annotated[str, InjectedToolArg]``) so the downstream can dedupe. A tool adapted
    before keeps its declared risk unless ``replace``. A name already used by a console tool
    that is not an adapted LangChain tool is an error.
    """
    with _adapted_lock:
        existing = tool_find(tool.name)
        if existing is not None and tool.name not in _adapted:
            raise ValueError(f"tool name {tool.name!r} is already a console tool; rename your tool")
        if existing is not None and not replace:
            if _adapted[tool.name] is not tool:
                _adapted[tool.name] = tool
                existing = tool_register(_spec_for(tool, existing.tier, existing.blast_radius))
            return existing
        risk = risk or ToolRisk()
        _adapted[tool.name] = tool
        return tool_register(_spec_for(tool, risk.tier, risk.blast_radius))


def _spec_for(tool: BaseTool, tier: str, blast_radius: str) -> ToolSpec:
    return ToolSpec(
        name=tool.name,
        description=tool.description,
        args_model=_args_model(tool),
        tier=tier,
        run=_tool_runner(tool.name),
        blast_radius=blast_radius,
    )


def _args_model(tool: BaseTool) -> type[BaseModel]:
    """The args the model may send (``tool_call_schema``: injected args left out)."""
    schema = tool.tool_call_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema
    # A JSON-schema tool: accept any object; the tool checks its own args when it runs.
    return create_model(f"{tool.name}_args", __config__=ConfigDict(extra="allow"))


def _tool_runner(name: str) -> ToolFunc:
    def run(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        tool = _adapted[name]
        call_args = dict(args)
        if key is not None and IDEMPOTENCY_ARG in tool.get_input_schema().model_fields:
            call_args[IDEMPOTENCY_ARG] = key
        output = tool.invoke(call_args)
        if isinstance(output, ToolMessage):
            output = message_text(output)
        return {"output": json.loads(json.dumps(output, default=str))}

    return run


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
    """

    def __init__(
        self,
        *,
        tools: Sequence[BaseTool] = (),
        risk: Mapping[str, ToolRisk | str] | None = None,
        default_tier: str = DEFAULT_TIER,
    ) -> None:
        super().__init__()
        self.default_tier = default_tier
        self.risk = {
            name: value if isinstance(value, ToolRisk) else ToolRisk(tier=value)
            for name, value in (risk or {}).items()
        }
        for tool in tools:
            self._spec(tool.name, tool)

    def _spec(self, name: str, tool: BaseTool | None) -> ToolSpec | None:
        if tool is None:
            return tool_find(name) if name in _adapted else None
        declared = self.risk.get(name)
        return tool_adapt(
            tool,
            risk=declared or ToolRisk(tier=self.default_tier),
            replace=declared is not None,
        )

    def _governed_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        call = request.tool_call
        name = call["name"]
        spec = self._spec(name, request.tool)
        if spec is None:
            return handler(request)  # not a tool of this agent: ToolNode reports it
        try:
            args = spec.validate(call["args"])
        except ValidationError as exc:
            return _tool_message(call, f"Invalid arguments, the tool did not run: {exc}", "error")
        tier = policy.tier_for_call(tool=name, args=args, default_tier=spec.tier)
        if not spec.has_side_effects and not policy.tier_requires_approval(tier):
            return handler(request)
        state = request.state if isinstance(request.state, dict) else {}
        decision = approval_gate(
            tool=name,
            args=args,
            rationale=_rationale(state),
            evidence=_evidence(state),
            requested_at=(state.get("gate_requested_at") or {}).get(call["id"]),
        )
        if decision["decision"] in ("reject", "respond"):
            return _answer(call, decision)
        if spec.has_side_effects:
            result = self._through_ledger(call, decision)
        else:
            approved_call = {**call, "args": decision["args"]}
            view = {**state, DECISIONS_KEY: {call["id"]: decision}}
            result = handler(request.override(tool_call=approved_call, state=view))
        return _edit_noted(result, decision)

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
