"""Translating between LangGraph interrupts and approval requests.

The runner is the one seam (DESIGN.md): an interrupt's value becomes one approval request per
action, and decided approvals become the interrupt's resume value. Payloads the console does not
recognise are kept whole and answered with a respond box, never dropped.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone

from agents.gate import PAYLOAD_TYPE
from approvals import policy

UNKNOWN_TOOL = "(agent question)"


def _expires(payload: dict[str, Any], tier: str) -> dt.datetime:
    raw = payload.get("expires_at")
    if isinstance(raw, str):
        try:
            value = dt.datetime.fromisoformat(raw)
            return value if timezone.is_aware(value) else timezone.make_aware(value)
        except ValueError:
            pass
    return timezone.now() + dt.timedelta(seconds=policy.tier_ttl_seconds(tier))


def approval_items(*, interrupt_id: str, value: Any) -> list[dict[str, Any]]:
    """One approval request item per action the interrupt asks a person about."""
    if isinstance(value, dict) and value.get("type") == PAYLOAD_TYPE:
        tier = str(value.get("tier") or "critical")
        return [
            {
                "interrupt_id": interrupt_id,
                "action_index": 0,
                "tool": str(value.get("tool") or UNKNOWN_TOOL),
                "args": value.get("args") if isinstance(value.get("args"), dict) else {},
                "payload": value,
                "tier": tier,
                "allowed_decisions": list(value.get("allowed_decisions") or policy.ALL_DECISIONS),
                "expires_at": _expires(value, tier),
            }
        ]
    # Unrecognised: shown raw, answerable with a response only.
    payload = value if isinstance(value, dict) else {"value": value}
    tier = "write"
    return [
        {
            "interrupt_id": interrupt_id,
            "action_index": 0,
            "tool": str(payload.get("tool") or UNKNOWN_TOOL)
            if isinstance(payload, dict)
            else UNKNOWN_TOOL,
            "args": {},
            "payload": payload,
            "tier": tier,
            "allowed_decisions": ["respond"],
            "expires_at": _expires(payload, tier),
        }
    ]


def resume_value(*, value: Any, decisions: list[dict[str, Any]]) -> Any:
    """The value to resume one interrupt with, from its approvals' decisions (action order)."""
    if isinstance(value, dict) and value.get("type") == PAYLOAD_TYPE:
        return decisions[0]
    # Unrecognised payloads get the reviewer's response text.
    first = decisions[0]
    return first.get("message", "") if first.get("decision") == "respond" else first
