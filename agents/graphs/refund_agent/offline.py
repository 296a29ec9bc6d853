"""What the offline model answers for the refund agent (no network needed)."""

from __future__ import annotations

import json

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from agents.runtime.llm import OfflineReply, json_block, message_text

REFUND_FIELDS = ("order_id", "amount", "reason", "sku", "quantity", "customer_email")


def refund_responder(messages: list[BaseMessage], tools: list[str]) -> OfflineReply:
    """First turn: call refund_order with the request's fields. After it answers: summarise."""
    last = messages[-1] if messages else None
    if isinstance(last, ToolMessage):
        return _summary(last), []
    request = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
    facts = json_block(message_text(request)) if request else {}
    if not facts or "refund_order" not in tools:
        return "I need the order, amount, reason and sku to refund.", []
    args = {field: facts[field] for field in REFUND_FIELDS if field in facts}
    return (
        f"The customer asks for {facts.get('amount')} back on order {facts.get('order_id')} "
        f"because: {facts.get('reason')}. Refunding and restocking the item.",
        [{"name": "refund_order", "args": args}],
    )


def _summary(message: ToolMessage) -> str:
    text = message_text(message)
    if message.status == "error":
        return f"The refund did not happen: {text}"
    try:
        outcome = json.loads(text[text.find("{") :])
    except ValueError:
        return text
    if outcome.get("status") == "refunded":
        return f"Order {outcome['order_id']} is refunded and the customer was told."
    if outcome.get("status") == "rolled_back":
        return (
            f"The refund failed at the {outcome.get('failed_step')} step and every earlier step "
            "was undone."
        )
    return text
