"""Translating between LangGraph interrupts and approval requests.

The runner is the one seam (DESIGN.md): an interrupt's value becomes one approval request per
action, and decided approvals become the interrupt's resume value. Four kinds of interrupt are
understood:

- the console's own gate (``agents.gate``, type ``console.approval``): one action, resumed with
  the console's decision dict;
- LangChain's ``HumanInTheLoopMiddleware`` in ``batched`` mode (an ``HITLRequest``): one
  approval per action request, resumed once all are decided with ``{"decisions": [...]}`` in
  their order;
- its ``per_call`` mode (a ``ToolApprovalRequest``, type ``tool_approval``): one approval per
  interrupt, resumed with a single decision that honours the interrupt's ``response_schema``;
- Agent Inbox's ``HumanInterrupt`` (alone or a list of one): one approval, resumed with its
  ``HumanResponse`` in the same shape (``agents.hitl.agent_inbox``).

Payloads the console does not recognise are kept whole and answered with a respond box, never
dropped.
"""

from __future__ import annotations

import json
from typing import Any

from agents.hitl import agent_inbox
from agents.hitl.items import DEFAULT_TIER, action_item, expires_for
from agents.hitl.on_deny import HITL_BATCH, HITL_GOES_ON
from approvals import policy
from approvals.contract import is_console_payload, schema_ref_resolve

UNKNOWN_TOOL = "(agent question)"
HITL_PROTOCOL = "langchain.hitl"
TOOL_APPROVAL = "tool_approval"
CONSOLE_PROTOCOL = "console"
# Tools the console does not know fall in this tier (a person must look at them).
HITL_DEFAULT_TIER = DEFAULT_TIER
# Agent Inbox's HumanInterrupt (alone or a list of one).
is_human_interrupt = agent_inbox.is_human_interrupt
OTHER_PROTOCOL = "other"


def is_hitl_request(value: Any) -> bool:
    """A batched ``HITLRequest``: action requests plus their review configs."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("action_requests"), list)
        and isinstance(value.get("review_configs"), list)
        and all(
            isinstance(a, dict) and isinstance(a.get("name"), str) for a in value["action_requests"]
        )
    )


def is_tool_approval(value: Any) -> bool:
    """A per-call ``ToolApprovalRequest``."""
    return (
        isinstance(value, dict)
        and value.get("type") == TOOL_APPROVAL
        and isinstance(value.get("name"), str)
    )


def protocol_name(value: Any) -> str:
    """Which protocol an interrupt value speaks: console | langchain.hitl | tool_approval |
    agent_inbox | other."""
    if is_console_payload(value):
        return CONSOLE_PROTOCOL
    if is_hitl_request(value):
        return HITL_PROTOCOL
    if is_tool_approval(value):
        return TOOL_APPROVAL
    if agent_inbox.is_human_interrupt(value):
        return agent_inbox.AGENT_INBOX
    return OTHER_PROTOCOL


def approval_items(
    *, interrupt_id: str, value: Any, response_schema: Any = None
) -> list[dict[str, Any]]:
    """One approval request item per action the interrupt asks a person about."""
    if is_console_payload(value):
        tier = str(value.get("tier") or "critical")
        return [
            {
                "interrupt_id": interrupt_id,
                "action_index": 0,
                "tool": str(value.get("tool") or UNKNOWN_TOOL),
                "args": value.get("args") if isinstance(value.get("args"), dict) else {},
                "payload": value,
                "tier": tier,
                "allowed_decisions": _known_decisions(value.get("allowed_decisions")),
                "expires_at": expires_for(value, tier),
            }
        ]
    if is_hitl_request(value):
        actions = value["action_requests"]
        return [
            _hitl_item(
                interrupt_id=interrupt_id,
                index=index,
                count=len(actions),
                mode="batched",
                action=action,
                review=_review_config(value["review_configs"], index, action["name"]),
            )
            for index, action in enumerate(actions)
        ]
    if is_tool_approval(value):
        schema = response_schema if isinstance(response_schema, dict) else None
        review: dict[str, Any] = {"allowed_decisions": schema_decisions(schema)}
        args_schema = schema_edit_args(schema)
        if args_schema is not None:
            review["args_schema"] = args_schema
        return [
            _hitl_item(
                interrupt_id=interrupt_id,
                index=0,
                count=1,
                mode="per_call",
                action=value,
                review=review,
            )
        ]
    if agent_inbox.is_human_interrupt(value):
        return agent_inbox.approval_items(interrupt_id=interrupt_id, value=value)
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
            "expires_at": expires_for(payload, tier),
        }
    ]


def _known_decisions(claimed: Any) -> list[str]:
    """The known decisions of a console payload's ``allowed_decisions`` (all without any)."""
    known = [d for d in policy.ALL_DECISIONS if isinstance(claimed, list) and d in claimed]
    return known or list(policy.ALL_DECISIONS)


def resume_value(*, value: Any, decisions: list[dict[str, Any]]) -> Any:
    """The value to resume one interrupt with, from its approvals' decisions (action order)."""
    if is_console_payload(value):
        return decisions[0]
    if is_hitl_request(value):
        names = [action["name"] for action in value["action_requests"]]
        return {
            "decisions": [
                hitl_decision(decision, tool=name)
                for decision, name in zip(decisions, names, strict=True)
            ]
        }
    if is_tool_approval(value):
        return hitl_decision(decisions[0], tool=value["name"])
    if agent_inbox.is_human_interrupt(value):
        return agent_inbox.resume_value(value=value, decisions=decisions)
    # Unrecognised payloads get the reviewer's response text.
    first = decisions[0]
    return first.get("message", "") if first.get("decision") == "respond" else first


def reject_value(*, value: Any, message: str) -> Any:
    """The value rejecting every action of an interrupt, in its protocol (a cancelled run's
    answer: never an approve)."""
    count = len(value["action_requests"]) if is_hitl_request(value) else 1
    return resume_value(value=value, decisions=[{"decision": "reject", "message": message}] * count)


def hitl_decision(decision: dict[str, Any], *, tool: str) -> dict[str, Any]:
    """The console's decision dict as LangChain's HITL ``Decision``."""
    kind = decision.get("decision")
    message = str(decision.get("message") or "")
    if kind == "approve":
        return {"type": "approve"}
    if kind == "edit":
        args = decision.get("args") if isinstance(decision.get("args"), dict) else {}
        return {"type": "edit", "edited_action": {"name": tool, "args": args}}
    if kind == "reject":
        return {"type": "reject", "message": message} if message else {"type": "reject"}
    if kind == "respond":
        return {"type": "respond", "message": message}
    raise ValueError(f"not a console decision: {decision!r}")


# --- LangChain HITL payloads ----------------------------------------------------------------


def _review_config(configs: list[Any], index: int, name: str) -> dict[str, Any]:
    """The review config of the action at ``index``: same position, else the first for its name."""
    at = configs[index] if index < len(configs) else None
    if isinstance(at, dict) and at.get("action_name") in (None, name):
        return at
    for config in configs:
        if isinstance(config, dict) and config.get("action_name") == name:
            return config
    return {"allowed_decisions": list(policy.ALL_DECISIONS)}


def _hitl_item(
    *,
    interrupt_id: str,
    index: int,
    count: int,
    mode: str,
    action: dict[str, Any],
    review: dict[str, Any],
) -> dict[str, Any]:
    name = str(action["name"])
    extra = {"tool_call_id": str(action["tool_call_id"])} if action.get("tool_call_id") else {}
    return action_item(
        interrupt_id=interrupt_id,
        index=index,
        count=count,
        protocol=HITL_PROTOCOL,
        mode=mode,
        name=name,
        args=action.get("args") if isinstance(action.get("args"), dict) else {},
        description=str(action.get("description") or ""),
        review=review,
        then=HITL_GOES_ON + (HITL_BATCH if mode == "batched" and count > 1 else ""),
        extra=extra,
    )


def _branches(schema: dict[str, Any]) -> list[dict[str, Any]]:
    members = schema.get("oneOf") or schema.get("anyOf")
    if isinstance(members, list):
        return [b for b in (schema_ref_resolve(schema, m) for m in members) if isinstance(b, dict)]
    return [schema]


def _branch_type(branch: dict[str, Any]) -> str | None:
    kind = (branch.get("properties") or {}).get("type") or {}
    const = kind.get("const") if isinstance(kind, dict) else None
    if const is None and isinstance(kind, dict) and isinstance(kind.get("enum"), list):
        const = kind["enum"][0] if len(kind["enum"]) == 1 else None
    return const if isinstance(const, str) else None


def schema_decisions(schema: dict[str, Any] | None) -> list[str]:
    """The decision types a per-call ``response_schema`` accepts (all of them without one)."""
    if not schema:
        return list(policy.ALL_DECISIONS)
    mapping = (schema.get("discriminator") or {}).get("mapping")
    found = list(mapping) if isinstance(mapping, dict) else []
    if not found:
        found = [t for t in (_branch_type(b) for b in _branches(schema)) if t]
    return [d for d in policy.ALL_DECISIONS if d in found] or list(policy.ALL_DECISIONS)


def schema_edit_args(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """The JSON schema an edit's ``args`` must match, from a per-call ``response_schema``."""
    if not schema:
        return None
    for branch in _branches(schema):
        if _branch_type(branch) != "edit":
            continue
        action = schema_ref_resolve(schema, (branch.get("properties") or {}).get("edited_action"))
        args = schema_ref_resolve(schema, (action or {}).get("properties", {}).get("args"))
        if not isinstance(args, dict):
            return None
        resolved = dict(args)
        if "$defs" in schema and "$defs" not in resolved and "$ref" in json.dumps(args):
            # Nested references inside the args still point at the root's definitions.
            resolved["$defs"] = schema["$defs"]
        return resolved
    return None
