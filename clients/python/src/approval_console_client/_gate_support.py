"""``RemoteGateMiddleware``'s helpers that need no LangChain (only middleware.py imports it)."""

from __future__ import annotations

import json
from typing import Any

IDEMPOTENCY_ARG = "idempotency_key"
CANCELLED_MESSAGE = (
    "The approval request for `{name}` was cancelled in the approval console. The tool was "
    "not executed. Do not retry this tool call unless the user explicitly requests it."
)
NO_APPROVAL_MESSAGE = (
    "The approval console gave no approval and idempotency key for `{name}`, so the tool was "
    "not executed. Do not retry this tool call unless the user explicitly requests it."
)


def takes_injected_key(tool: Any) -> bool:
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


def jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value
