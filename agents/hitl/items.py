"""One approval request item for one tool call an interrupt asks about, whatever the protocol
(LangChain HITL, Agent Inbox): the tier from the console's policy, the decisions the agent can
take narrowed by the tier, the tool's args schema, blast radius and on-deny line."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone

from agents.hitl.on_deny import on_deny_line
from agents.tools import tool_find
from approvals import policy
from approvals.contract import PAYLOAD_TYPE

# Tools the console does not know fall in this tier (a person must look at them).
DEFAULT_TIER = "write"


def expires_for(payload: dict[str, Any], tier: str) -> dt.datetime:
    """The payload's own ``expires_at`` if it has a readable one, else the tier's default."""
    raw = payload.get("expires_at")
    if isinstance(raw, str):
        try:
            value = dt.datetime.fromisoformat(raw)
            return value if timezone.is_aware(value) else timezone.make_aware(value)
        except ValueError:
            pass
    return timezone.now() + dt.timedelta(seconds=policy.tier_ttl_seconds(tier))


def action_item(
    *,
    interrupt_id: str,
    index: int,
    count: int,
    protocol: str,
    mode: str,
    name: str,
    args: dict[str, Any],
    description: str,
    review: dict[str, Any],
    then: str,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The item for the call ``name(args)``; ``review`` holds what the agent can take
    (``allowed_decisions``, optionally ``args_schema``), ``then`` what the run does after a
    rejection."""
    spec = tool_find(name)
    tier = policy.tier_for_call(
        tool=name, args=args, default_tier=spec.tier if spec else DEFAULT_TIER
    )
    configured = [d for d in review.get("allowed_decisions") or [] if d in policy.ALL_DECISIONS]
    configured = configured or list(policy.ALL_DECISIONS)
    # The agent's review config says what it can take; the tier narrows it further, and
    # always wins: when it forbids all the config allows, the tier's own decisions (policy
    # over the agent's wish; an agent that refuses such a decision fails closed).
    by_tier = policy.tier_allowed_decisions(tier)
    allowed = [d for d in by_tier if d in configured] or by_tier
    args_schema = review.get("args_schema")
    if not isinstance(args_schema, dict) and spec is not None:
        args_schema = spec.args_schema()
    payload: dict[str, Any] = {
        "type": PAYLOAD_TYPE,
        "protocol": protocol,
        "mode": mode,
        "tool": name,
        "args": args,
        "rationale": description,
        "evidence": [],
        "blast_radius": spec.describe_blast_radius(args) if spec else "",
        "on_deny": on_deny_line(spec, args, then=then),
        "tier": tier,
        "allowed_decisions": allowed,
        "action_index": index,
        "action_count": count,
    }
    if isinstance(args_schema, dict):
        payload["args_schema"] = args_schema
    payload.update(extra or {})
    expires_at = expires_for(payload, tier)
    payload["expires_at"] = expires_at.isoformat()
    return {
        "interrupt_id": interrupt_id,
        "action_index": index,
        "tool": name,
        "args": args,
        "payload": payload,
        "tier": tier,
        "allowed_decisions": allowed,
        "expires_at": expires_at,
    }
