"""``RemoteGateMiddleware``: LangChain's human-in-the-loop, decided in the approval console.

Needs the ``langchain`` extra. Built like LangChain's ``HumanInTheLoopMiddleware`` (batched
mode): after the model proposes tool calls, the governed ones become one ``HITLRequest``; the
middleware registers it with the console (idempotent on thread + a deterministic interrupt
id, so the node's re-run on resume finds the same request) and calls ``interrupt()``. The
agent's own web handler resumes the thread with ``ConsoleClient.resume_value(callback)`` (or
``resume_when_decided`` polls); the re-run reads the request from the console and applies ITS
``resume`` (still pending: it pauses again), as LangChain's would: approve keeps
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

from ._gate_support import (
    CANCELLED_MESSAGE,
    IDEMPOTENCY_ARG,
    NO_APPROVAL_MESSAGE,
    jsonable,
    takes_injected_key,
)
from .client import ConsoleClient
from .context import idempotency_key_set
from .errors import ConsoleError
from .models import CANCELLED, DECIDED, RemoteRequest

log = logging.getLogger("approval_console_client")

ALL_DECISIONS = ["approve", "edit", "reject", "respond"]
_GATED = "console_gated_calls"
_EDITED = "console_edited_calls"


class RemoteGateState(AgentState[Any]):
    """Private state: which call runs under which console approval, and reviewers' edits."""

    console_gated_calls: NotRequired[Annotated[dict[str, dict[str, Any]], PrivateStateAttr]]
    console_edited_calls: NotRequired[Annotated[dict[str, dict[str, Any]], PrivateStateAttr]]


def interrupt_id_for(
    tool_calls: list[ToolCall], *, message_id: str | None = None, position: int | None = None
) -> str:
    """The interrupt id of one model turn's governed calls: the same on every re-run.

    The turn is named by the AI message's ``message_id`` and its ``position`` in the thread's
    messages as well as by the calls: models that number tool calls per response (``call_0``)
    repeat ids across turns, and a later turn must never find an earlier turn's decision.
    """
    ids = [call.get("id") for call in tool_calls]
    if all(ids):
        calls = "\n".join(str(i) for i in ids)
    else:  # a model without tool call ids: the calls themselves
        calls = json.dumps([[c["name"], c["args"]] for c in tool_calls], sort_keys=True)
    basis = f"{position if position is not None else ''}\n{message_id or ''}\n{calls}"
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
        position, last = next(
            ((i, m) for i, m in reversed(list(enumerate(messages))) if isinstance(m, AIMessage)),
            (None, None),
        )
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
        request = self._register(
            calls, value, state, interrupt_id_for(calls, message_id=last.id, position=position)
        )
        while request.status not in (DECIDED, CANCELLED):
            # Whatever the thread is resumed with only wakes it up: the decision is the one
            # the console gives. Resumed while the console still says pending: pause again.
            interrupt({**value, "console_request_id": request.id})
            request = self.client.get(request.id)
            if request.is_pending:
                log.warning("resumed while request %s is pending: not acting on it", request.id)
        if request.status == CANCELLED:
            return self._cancelled(last, calls)
        response = request.resume
        decisions = response.get("decisions") if isinstance(response, dict) else None
        if not isinstance(decisions, list) or len(decisions) != len(calls):
            raise ValueError(
                f"The console's decisions ({response!r}) do not match "
                f"the {len(calls)} governed tool calls."
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
            if (
                approval is None
                or not approval.idempotency_key
                or not call.get("id")
                or (approval.tool and approval.tool != call["name"])
            ):  # no approval, no key: never run it (and never with the model's args)
                answers.append(_not_gated_message(call))
                continue
            gated[call["id"]] = {
                "request_id": request.id,
                "approval_id": approval.id,
                "idempotency_key": approval.idempotency_key,
            }
            if kind == "edit":
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

    def _register(
        self, calls: list[ToolCall], value: dict[str, Any], state: Any, interrupt_id: str
    ) -> RemoteRequest:
        thread_id = (get_config().get("configurable") or {}).get("thread_id")
        if not thread_id:
            raise ValueError("RemoteGateMiddleware needs a checkpointer and a thread_id in config")
        extra = self.context(calls, state) if self.context else {}
        return self.client.create(
            str(thread_id),
            interrupt_id,
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
            refused = self._ungated(request)
            return refused if refused is not None else handler(request)
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
            refused = self._ungated(request)
            return refused if refused is not None else await handler(request)
        with idempotency_key_set(gate["idempotency_key"]):
            try:
                result = await handler(to_run)
            except Exception as exc:
                self._report(gate, executed_args, {"error": repr(exc)}, "failed")
                raise
        return self._finish(request, gate, executed_args, result)

    def _ungated(self, request: ToolCallRequest) -> ToolMessage | None:
        """A governed call with no console approval in the state: answered, never run."""
        if request.tool_call["name"] not in self.interrupt_on:
            return None
        return _not_gated_message(request.tool_call)

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
        if takes_injected_key(request.tool):
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
                result=jsonable(result),
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


def _not_gated_message(call: ToolCall) -> ToolMessage:
    return ToolMessage(
        content=NO_APPROVAL_MESSAGE.format(name=call["name"]),
        name=call["name"],
        tool_call_id=call.get("id") or "",
        status="error",
    )


def _run_input(state: Any) -> dict[str, Any]:
    """The run's input shown in the console: the first human message's text."""
    first = next((m for m in state["messages"] if isinstance(m, HumanMessage)), None)
    return {"input": first.text if first is not None else ""}


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
