"""``RemoteGateMiddleware``: LangChain's human-in-the-loop, decided in the approval console.

Needs the ``langchain`` extra. Built like LangChain's ``HumanInTheLoopMiddleware`` (batched
mode): after the model proposes tool calls, the governed ones become one ``HITLRequest``; the
middleware registers it with the console (idempotent on thread + a deterministic interrupt
id, so the node's re-run on resume finds the same request) and calls ``interrupt()``. The
agent's own web handler resumes the thread with ``ConsoleClient.resume_value(callback)`` (or
``resume_when_decided`` polls), and the decisions apply as LangChain's would: approve keeps
the call, edit replaces its args, reject and respond answer it with a ``ToolMessage``. The
call that runs sees the console's idempotency key (``current_idempotency_key()``, or an
``idempotency_key`` argument the tool hides from the model with ``InjectedToolArg``), and its
outcome (executed args, result, succeeded/failed) is reported back to the console.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    PrivateStateAttr,
    ToolCallRequest,
)
from langchain_core.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from langgraph.config import get_config
from langgraph.types import Command, interrupt

from .client import ConsoleClient
from .context import idempotency_key_set
from .errors import ConsoleError
from .models import CANCELLED, DECIDED, RemoteRequest

log = logging.getLogger("approval_console_client")

ALL_DECISIONS = ["approve", "edit", "reject", "respond"]
IDEMPOTENCY_ARG = "idempotency_key"
_GATED = "console_gated_calls"
_EDITED = "console_edited_calls"
CANCELLED_MESSAGE = (
    "The approval request for `{name}` was cancelled in the approval console. The tool was "
    "not executed. Do not retry this tool call unless the user explicitly requests it."
)


class RemoteGateState(AgentState[Any]):
    """Private state: which call runs under which console approval, and reviewers' edits."""

    console_gated_calls: NotRequired[Annotated[dict[str, dict[str, Any]], PrivateStateAttr]]
    console_edited_calls: NotRequired[Annotated[dict[str, dict[str, Any]], PrivateStateAttr]]


def interrupt_id_for(tool_calls: list[ToolCall]) -> str:
    """The interrupt id of one model turn's governed calls: the same on every re-run."""
    ids = [call.get("id") for call in tool_calls]
    if all(ids):
        basis = "\n".join(str(i) for i in ids)
    else:  # a model without tool call ids: the calls themselves
        basis = json.dumps([[c["name"], c["args"]] for c in tool_calls], sort_keys=True)
    return "lc-" + hashlib.sha256(basis.encode()).hexdigest()[:40]


class RemoteGateMiddleware(AgentMiddleware):
    """Ask the approval console before the tools in ``interrupt_on`` run.

    ``interrupt_on`` maps a tool name to ``True`` (every decision allowed) or to
    ``{"allowed_decisions": [...], "description": str | callable}``, as for LangChain's
    ``HumanInTheLoopMiddleware``. ``callback_url`` (optional) must be on the host registered
    for the agent. ``context(tool_calls, state)`` may return ``evidence`` / ``rationale`` /
    ``blast_radius`` for the reviewer.
    """

    state_schema = RemoteGateState

    def __init__(
        self,
        interrupt_on: dict[str, bool | dict[str, Any]],
        client: ConsoleClient,
        *,
        callback_url: str | None = None,
        description_prefix: str = "Tool execution requires approval",
        context: Callable[[list[ToolCall], Any], dict[str, Any]] | None = None,
        edit_notice: str | None = "Note: a reviewer in the approval console edited this call.",
    ) -> None:
        super().__init__()
        self.client = client
        self.callback_url = callback_url
        self.description_prefix = description_prefix
        self.context = context
        self.edit_notice = edit_notice
        self.interrupt_on: dict[str, dict[str, Any]] = {}
        for name, config in interrupt_on.items():
            if config is True:
                self.interrupt_on[name] = {"allowed_decisions": list(ALL_DECISIONS)}
            elif isinstance(config, dict) and config.get("allowed_decisions"):
                self.interrupt_on[name] = config
            elif config is not False:
                raise ValueError(f"interrupt_on[{name!r}] needs a non-empty allowed_decisions")

    # -- after the model: ask ------------------------------------------------------------

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = state["messages"]
        last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        if last is None or not last.tool_calls:
            return None
        governed = [(i, c) for i, c in enumerate(last.tool_calls) if c["name"] in self.interrupt_on]
        if not governed:
            return {_GATED: {}, _EDITED: {}} if state.get(_GATED) or state.get(_EDITED) else None
        calls = [call for _, call in governed]
        value = {
            "action_requests": [self._action_request(c, state, runtime) for c in calls],
            "review_configs": [
                {
                    "action_name": c["name"],
                    "allowed_decisions": list(self.interrupt_on[c["name"]]["allowed_decisions"]),
                }
                for c in calls
            ],
        }
        request = self._register(calls, value, state)
        if request.status == DECIDED:
            response = request.resume  # decided before this (re-)run reached the pause
        elif request.status == CANCELLED:
            return self._cancelled(last, calls)
        else:
            response = interrupt({**value, "console_request_id": request.id})
        decisions = response["decisions"]
        if len(decisions) != len(calls):
            raise ValueError(
                f"Number of decisions ({len(decisions)}) does not match "
                f"number of governed tool calls ({len(calls)})."
            )
        gated: dict[str, dict[str, Any]] = {}
        edited: dict[str, dict[str, Any]] = {}
        answers: list[ToolMessage] = []
        for index, (call, decision) in enumerate(zip(calls, decisions, strict=True)):
            kind = decision.get("type")
            allowed = self.interrupt_on[call["name"]]["allowed_decisions"]
            if kind not in allowed:
                raise ValueError(
                    f"Decision type {kind!r} is not allowed for tool {call['name']!r}: "
                    f"expected one of {allowed}."
                )
            if kind in ("reject", "respond"):
                answers.append(_answer_message(call, decision))
                continue
            approval = request.approval_for(index)
            if approval is not None and call.get("id"):
                gated[call["id"]] = {
                    "request_id": request.id,
                    "approval_id": approval.id,
                    "idempotency_key": approval.idempotency_key,
                }
            if kind == "edit" and call.get("id"):
                edited[call["id"]] = decision["edited_action"]
        return {"messages": [last, *answers], _GATED: gated, _EDITED: edited}

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self.after_model(state, runtime)

    def _action_request(self, call: ToolCall, state: Any, runtime: Any) -> dict[str, Any]:
        described = self.interrupt_on[call["name"]].get("description")
        if callable(described):
            description = described(call, state, runtime)
        elif described is not None:
            description = described
        else:
            description = f"{self.description_prefix}\n\nTool: {call['name']}\nArgs: {call['args']}"
        return {"name": call["name"], "args": call["args"], "description": description}

    def _register(self, calls: list[ToolCall], value: dict[str, Any], state: Any) -> RemoteRequest:
        thread_id = (get_config().get("configurable") or {}).get("thread_id")
        if not thread_id:
            raise ValueError("RemoteGateMiddleware needs a checkpointer and a thread_id in config")
        extra = self.context(calls, state) if self.context else {}
        return self.client.create(
            str(thread_id),
            interrupt_id_for(calls),
            value,
            evidence=extra.get("evidence"),
            rationale=extra.get("rationale", ""),
            blast_radius=extra.get("blast_radius", ""),
            callback_url=self.callback_url,
            run_input=_run_input(state),
        )

    def _cancelled(self, last: AIMessage, calls: list[ToolCall]) -> dict[str, Any]:
        answers = [
            ToolMessage(
                content=CANCELLED_MESSAGE.format(name=c["name"]),
                name=c["name"],
                tool_call_id=c["id"],
                status="error",
            )
            for c in calls
        ]
        return {"messages": [last, *answers], _GATED: {}, _EDITED: {}}

    # -- around the tool: run with the key, report ---------------------------------------

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command],
    ) -> ToolMessage | Command:
        gate, to_run, executed_args = self._prepare(request)
        if gate is None:
            return handler(request)
        with idempotency_key_set(gate["idempotency_key"]):
            try:
                result = handler(to_run)
            except Exception as exc:
                self._report(gate, executed_args, {"error": repr(exc)}, "failed")
                raise
        return self._finish(request, gate, executed_args, result)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command]],
    ) -> ToolMessage | Command:
        gate, to_run, executed_args = self._prepare(request)
        if gate is None:
            return await handler(request)
        with idempotency_key_set(gate["idempotency_key"]):
            try:
                result = await handler(to_run)
            except Exception as exc:
                self._report(gate, executed_args, {"error": repr(exc)}, "failed")
                raise
        return self._finish(request, gate, executed_args, result)

    def _prepare(
        self, request: ToolCallRequest
    ) -> tuple[dict[str, Any] | None, ToolCallRequest, dict[str, Any]]:
        call_id = request.tool_call.get("id")
        gate = (request.state.get(_GATED) or {}).get(call_id) if call_id else None
        if gate is None:
            return None, request, dict(request.tool_call["args"])
        edit = (request.state.get(_EDITED) or {}).get(call_id)
        args = dict(edit["args"]) if edit else dict(request.tool_call["args"])
        sent = dict(args)
        if _takes_injected_key(request.tool):
            sent[IDEMPOTENCY_ARG] = gate["idempotency_key"]
        to_run = request.override(tool_call={**request.tool_call, "args": sent})
        return gate, to_run, args

    def _finish(
        self,
        request: ToolCallRequest,
        gate: dict[str, Any],
        executed_args: dict[str, Any],
        result: ToolMessage | Command,
    ) -> ToolMessage | Command:
        message = result if isinstance(result, ToolMessage) else None
        failed = message is not None and message.status == "error"
        content = message.content if message is not None else repr(result)
        self._report(gate, executed_args, content, "failed" if failed else "succeeded")
        edited = (request.state.get(_EDITED) or {}).get(request.tool_call.get("id"))
        if edited and self.edit_notice and message is not None and isinstance(content, str):
            notice = f"{self.edit_notice} Executed with arguments {json.dumps(executed_args)}."
            return message.model_copy(update={"content": f"{notice}\n\n{content}"})
        return result

    def _report(self, gate: dict[str, Any], args: dict[str, Any], result: Any, status: str) -> None:
        """Report the outcome; a failure to report is logged, never raised (the effect ran:
        the console shows the decision as not reported until a later report arrives)."""
        try:
            self.client.report_outcome(
                gate["request_id"],
                approval_id=gate["approval_id"],
                idempotency_key=gate["idempotency_key"],
                executed_args=args,
                result=_jsonable(result),
                status=status,
            )
        except ConsoleError:
            log.exception("reporting the outcome of approval %s failed", gate["approval_id"])


def _answer_message(call: ToolCall, decision: dict[str, Any]) -> ToolMessage:
    """The message the model gets instead of the tool's result (reject / respond)."""
    if decision["type"] == "respond":
        content = decision.get("message", "")
    elif reason := decision.get("message"):
        content = f"User rejected the tool call for `{call['name']}` with reason: {reason}"
    else:
        content = (
            f"User rejected the tool call for `{call['name']}` with id {call['id']}. The tool "
            "was not executed. Do not retry this tool call unless the user explicitly requests it."
        )
    return ToolMessage(
        content=content,
        name=call["name"],
        tool_call_id=call["id"],
        status="success" if decision["type"] == "respond" else "error",
    )


def _takes_injected_key(tool: Any) -> bool:
    """Whether the tool has an ``idempotency_key`` argument hidden from the model."""
    if tool is None:
        return False
    try:
        full = tool.get_input_schema().model_fields
        shown = tool.tool_call_schema
    except Exception:  # noqa: BLE001 - a tool without Pydantic schemas takes no injected key
        return False
    shown_fields = getattr(shown, "model_fields", None)
    return (
        IDEMPOTENCY_ARG in full and shown_fields is not None and IDEMPOTENCY_ARG not in shown_fields
    )


def _run_input(state: Any) -> dict[str, Any]:
    """The run's input shown in the console: the first human message's text."""
    first = next((m for m in state["messages"] if isinstance(m, HumanMessage)), None)
    return {"input": first.text if first is not None else ""}


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def pending_request_ids(result: Any) -> list[str]:
    """The console request ids a graph's ``invoke`` result (or state snapshot) waits on."""
    interrupts = result.get("__interrupt__", []) if isinstance(result, dict) else result.interrupts
    return [
        i.value["console_request_id"]
        for i in interrupts
        if isinstance(i.value, dict) and "console_request_id" in i.value
    ]


def resume_when_decided(
    graph: Any,
    client: ConsoleClient,
    config: dict[str, Any],
    request_id: str,
    *,
    timeout: float | None = None,
) -> Any:
    """Long-poll the console until ``request_id`` is decided, then resume the thread.

    For agents that cannot receive callbacks. Returns what ``graph.invoke`` returns; raises
    ``TimeoutError`` if still pending after ``timeout`` seconds, ``NotDecided`` if cancelled.
    """
    request = client.wait(request_id, timeout=timeout)
    if request.is_pending:
        raise TimeoutError(f"approval request {request_id} is still pending")
    return graph.invoke(Command(resume=client.resume_value(request)), config)


__all__ = [
    "RemoteGateMiddleware",
    "interrupt_id_for",
    "pending_request_ids",
    "resume_when_decided",
]
