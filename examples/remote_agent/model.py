"""A scripted, offline chat model: it proposes one refund, then sums up what happened.

"Refund 1250 cents for order A-1" -> a ``refund_issue(order_id="A-1", amount_cents=1250)``
call; once the tool (or a reviewer's rejection) answered, a closing message. The tool call's
id is a hash of the conversation so far: the same turn gives the same id.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult


class ScriptedChatModel(BaseChatModel):
    """Proposes ``refund_issue`` for the order and amount it reads, then answers."""

    @property
    def _llm_type(self) -> str:
        return "scripted-refunds"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: Any = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=reply(messages))])


def reply(messages: list[BaseMessage]) -> AIMessage:
    answered = [m for m in messages if isinstance(m, ToolMessage)]
    if answered:
        return AIMessage(content=f"Done. {answered[-1].name}: {answered[-1].text}")
    request = next((m for m in messages if isinstance(m, HumanMessage)), None)
    text = request.text if request is not None else ""
    order = re.search(r"\border\s+([A-Za-z0-9-]+)", text)
    amount = re.search(r"(\d+)\s*cents", text)
    if not (order and amount):
        return AIMessage(
            content="Which order, and how many cents? e.g. 'Refund 500 cents for order A-1'."
        )
    basis = "\n".join(f"{m.type}:{m.text}" for m in messages)
    call_id = "call_" + hashlib.sha256(basis.encode()).hexdigest()[:24]
    return AIMessage(
        content=f"Refunding {amount.group(1)} cents for order {order.group(1)}.",
        tool_calls=[
            {
                "name": "refund_issue",
                "args": {"order_id": order.group(1), "amount_cents": int(amount.group(1))},
                "id": call_id,
                "type": "tool_call",
            }
        ],
    )
