"""What the offline model answers for the helpdesk agent, so the example runs without a key.

It reads the request, looks every customer it names up, then proposes a credit ("credit ...
N USD") and/or an account closure ("close"), in one turn, and finally sums up.
"""

from __future__ import annotations

import re

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from agents.runtime.llm import OfflineReply, message_text


def helpdesk_responder(messages: list[BaseMessage], tools: list[str]) -> OfflineReply:
    request = next((m for m in messages if isinstance(m, HumanMessage)), None)
    text = message_text(request) if request else ""
    customers = list(dict.fromkeys(re.findall(r"\bC-\d+\b", text)))
    done = [m for m in messages if isinstance(m, ToolMessage)]
    if not customers:
        return "Which customer is this about? I need an id like C-42.", []
    if not done:
        calls = [{"name": "lookup_customer", "args": {"customer_id": c}} for c in customers]
        return f"Looking up {', '.join(customers)} first.", calls
    if all(m.name == "lookup_customer" for m in done):
        return _actions(text, customers, done)
    outcomes = "; ".join(
        f"{m.name}: {message_text(m)}" for m in done if m.name != "lookup_customer"
    )
    return f"Done. {outcomes}", []


def _actions(text: str, customers: list[str], lookups: list[ToolMessage]) -> OfflineReply:
    calls = []
    reasons = []
    amount = re.search(r"(\d+)\s*(?:USD|dollars|\$)", text)
    lowered = text.lower()
    if "credit" in lowered and amount:
        calls.append(
            {
                "name": "issue_credit",
                "args": {
                    "customer_id": customers[0],
                    "amount": int(amount.group(1)),
                    "reason": "charged twice" if "twice" in lowered else "goodwill credit",
                },
            }
        )
        reasons.append(f"{customers[0]} asks for {amount.group(1)} USD back")
    if "close" in lowered:
        calls.append(
            {
                "name": "close_account",
                "args": {"customer_id": customers[-1], "reason": "the owner asked"},
            }
        )
        reasons.append(f"{customers[-1]} asks to close their account")
    if not calls:
        return "The lookup is done; nothing to change.", []
    seen = "; ".join(message_text(m) for m in lookups)
    return f"{'; '.join(reasons)}. The records say: {seen}.", calls
