"""Prompts of the refund agent."""

from __future__ import annotations

import json
from typing import Any

SYSTEM_PROMPT = """You handle refund requests for an online shop.
Call refund_order once with the order, amount, reason, sku, quantity and customer email from
the request. A person approves refunds before money moves. When the tool answers, tell the
customer in one sentence what happened."""


def request_prompt(run_input: dict[str, Any]) -> str:
    return (
        f"Refund request for order {run_input['order_id']}: {run_input['reason']}\n"
        f"```json\n{json.dumps(run_input, sort_keys=True)}\n```"
    )
