"""The chat model factory: a real provider when AGENT_MODEL is set, else an offline model.

``OfflineChatModel`` answers deterministically and emits real ``AIMessage.tool_calls``, so the
demo agents and the tests run without a network. Each agent gives it a responder (what it
would answer for that agent's prompts); tool call ids are derived from the conversation, so a
replay of the same conversation yields the same ids (and the same idempotency keys).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from django.conf import settings
from langchain.chat_models import init_chat_model
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool

# (messages, names of the bound tools) -> (text, [{"name": ..., "args": {...}}, ...])
OfflineReply = tuple[str, list[dict[str, Any]]]
OfflineResponder = Callable[[list[BaseMessage], list[str]], OfflineReply]


def default_responder(messages: list[BaseMessage], tools: list[str]) -> OfflineReply:
    """No scripted behaviour: acknowledge the last message, call no tool."""
    last = messages[-1] if messages else None
    if isinstance(last, ToolMessage):
        return f"Done: {last.name} returned {message_text(last)[:200]}", []
    return "Offline model: nothing to do.", []


class OfflineChatModel(BaseChatModel):
    """A deterministic chat model that needs no network (the default when AGENT_MODEL is empty)."""

    responder: OfflineResponder = default_responder

    @property
    def _llm_type(self) -> str:
        return "offline"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": "offline", "responder": getattr(self.responder, "__qualname__", "")}

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | Any],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[Any, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        tools = [tool["function"]["name"] for tool in kwargs.get("tools") or []]
        text, calls = self.responder(messages, tools)
        unknown = [call["name"] for call in calls if call["name"] not in tools]
        if unknown:
            raise ValueError(f"offline responder called tools that are not bound: {unknown}")
        digest = conversation_digest(messages)
        tool_calls = [
            {
                "name": call["name"],
                "args": call["args"],
                "id": f"call_{hashlib.sha256(f'{digest}:{n}'.encode()).hexdigest()[:24]}",
                "type": "tool_call",
            }
            for n, call in enumerate(calls)
        ]
        input_tokens = sum(token_estimate(message_text(m)) for m in messages)
        output_tokens = token_estimate(text) + sum(
            token_estimate(json.dumps(c["args"], sort_keys=True)) for c in calls
        )
        message = AIMessage(
            content=text,
            tool_calls=tool_calls,
            usage_metadata=UsageMetadata(
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                total_tokens=input_tokens + output_tokens,
            ),
            response_metadata={"model_name": "offline"},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


# A wrapper of the model for the drive under way in this context only (a canary's scripted
# model: agents/canary.py); never set process-wide.
_wrapper: contextvars.ContextVar[Callable[[BaseChatModel], BaseChatModel] | None] = (
    contextvars.ContextVar("chat_model_wrapper", default=None)
)


@contextlib.contextmanager
def chat_model_wrapped(wrap: Callable[[BaseChatModel], BaseChatModel]) -> Iterator[None]:
    """Within this block (this context), ``chat_model_get`` returns ``wrap(model)``."""
    token = _wrapper.set(wrap)
    try:
        yield
    finally:
        _wrapper.reset(token)


def chat_model_get(*, offline_responder: OfflineResponder | None = None) -> BaseChatModel:
    """``init_chat_model(settings.AGENT_MODEL)`` when set ("provider:model"), else offline."""
    if settings.AGENT_MODEL:
        model = init_chat_model(settings.AGENT_MODEL)
    else:
        model = OfflineChatModel(responder=offline_responder or default_responder)
    wrap = _wrapper.get()
    return wrap(model) if wrap is not None else model


def message_text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return " ".join(
        part if isinstance(part, str) else str(part.get("text", "")) for part in content
    )


def conversation_digest(messages: list[BaseMessage]) -> str:
    """sha256 over what the conversation says (not over message ids, which vary per run)."""
    parts = []
    for message in messages:
        parts.append(
            {
                "type": message.type,
                "content": message_text(message),
                "tool_calls": [
                    {"name": c["name"], "args": c["args"], "id": c.get("id")}
                    for c in getattr(message, "tool_calls", None) or []
                ],
                "tool_call_id": getattr(message, "tool_call_id", None),
            }
        )
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def token_estimate(text: str) -> int:
    """About four characters per token, the usual rule of thumb."""
    return max(1, (len(text) + 3) // 4)


def json_block(text: str) -> dict[str, Any]:
    """The last ```json fenced block in a prompt, for responders that read structured facts."""
    start = text.rfind("```json")
    if start < 0:
        return {}
    end = text.find("```", start + 7)
    try:
        return json.loads(text[start + 7 : end if end >= 0 else None])
    except json.JSONDecodeError:
        return {}
