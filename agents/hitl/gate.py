"""The policy gate: pause a tool call for a person before it runs (invariants 2 and 7).

``approval_gate`` must be called before anything with a side effect in the same node: the node
re-runs from its top on resume, and ``interrupt()`` returns the decision the second time.
Never wrap it in a broad ``except``: the interrupt is an exception.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.utils import timezone
from langgraph.config import get_config
from langgraph.types import interrupt
from pydantic import ValidationError

from agents.hitl.autonomy import autonomy_decision, payload_confidence
from agents.hitl.on_deny import GRAPH_DECIDES, on_deny_line
from agents.tools import tool_get
from approvals import policy
from approvals.contract import PAYLOAD_TYPE


class DecisionError(ValueError):
    """A resume value that is not a valid decision for this gate."""


def gate_payload(
    *,
    thread_id: str,
    tool: str,
    args: dict[str, Any],
    rationale: str,
    evidence: list[Any],
    tier: str,
    requested_at: str | None = None,
    on_deny: str | None = None,
) -> dict[str, Any]:
    """The machine-derived payload a reviewer sees (and whose hash they sign).

    ``on_deny`` says what the caller does after a rejection (the graph knows; without it the
    line says the graph takes its own next step); the tool's declared meaning comes first."""
    spec = tool_get(tool)
    start = dt.datetime.fromisoformat(requested_at) if requested_at else timezone.now()
    expires_at = start + dt.timedelta(seconds=policy.tier_ttl_seconds(tier))
    return {
        "type": PAYLOAD_TYPE,
        "tool": tool,
        "args": args,
        "rationale": rationale,
        "evidence": evidence,
        "blast_radius": spec.describe_blast_radius(args),
        "on_deny": on_deny_line(spec, args, then=GRAPH_DECIDES if on_deny is None else on_deny),
        "args_schema": spec.args_schema(),
        "tier": tier,
        "allowed_decisions": policy.tier_allowed_decisions(tier),
        "run_url": f"{settings.CONSOLE_BASE_URL.rstrip('/')}/runs/{thread_id}/",
        "expires_at": expires_at.isoformat(),
    }


def approval_gate(
    *,
    tool: str,
    args: dict[str, Any],
    rationale: str,
    evidence: list[Any] | None = None,
    requested_at: str | None = None,
    on_deny: str | None = None,
    key: str | None = None,
    confidence: float | None = None,
) -> dict[str, Any]:
    """Return the decision for this call: auto-approved by policy, run without waiting by an
    autonomy rule, or decided by a person.

    ``on_deny``: one line saying what your graph does after a rejection (e.g. "the run ends"),
    shown to the reviewer beside the reject button.

    ``key``: the idempotency key the call's effect will run under (the ledger key); without
    it the call always waits for a person. Call the gate only right before that effect runs.
    ``confidence``: the agent's stated confidence (0-1); shown to the reviewer in the payload,
    and below a rule's threshold the call waits for a person. A call an autonomy rule lets
    run returns ``by`` = "policy:<mode>" and ``autonomous_action_id``.

    The result is ``{"decision": approve|edit|reject|respond, "args": final args,
    "message": str, "by": str, "approval_id": int | None, "tier": str}``; for approve and edit,
    ``args`` are validated against the tool's schema.
    """
    spec = tool_get(tool)
    tier = policy.tier_for_call(tool=tool, args=args, default_tier=spec.tier)
    if not policy.tier_requires_approval(tier):
        # Nothing checks an auto-approved call later: only the policy in force now may waive
        # the person (not the reading policy_read_once took when the advance began).
        with policy.policy_fresh():
            tier = policy.tier_for_call(tool=tool, args=args, default_tier=spec.tier)
            auto = not policy.tier_requires_approval(tier)
    else:
        auto = False
    if auto:
        return {
            "decision": "approve",
            "args": args,
            "message": "",
            "by": "policy:auto",
            "approval_id": None,
            "tier": tier,
        }
    thread_id = get_config()["configurable"]["thread_id"]
    payload = gate_payload(
        thread_id=thread_id,
        tool=tool,
        args=args,
        rationale=rationale,
        evidence=evidence or [],
        tier=tier,
        requested_at=requested_at,
        on_deny=on_deny,
    )
    payload = payload_confidence(payload, confidence)
    ran = autonomy_decision(
        thread_id=thread_id,
        tool=tool,
        args=args,
        default_tier=spec.tier,
        key=key,
        confidence=confidence,
        payload=payload,
    )
    if ran is not None:
        return ran
    answer = interrupt(payload)
    result = decision_normalise(answer, proposed_args=args, tool=tool, tier=tier)
    # Re-check at execution: the policy in force now, for the final args. If they fall in a
    # higher tier than the approval was decided in (an edit, or a policy change), nothing runs
    # and a new approval at that tier is requested (the runner audits "approval.rechecked").
    # A further interrupt in this node is matched by its position on resume (deterministic).
    decided_tier = _decided_tier(answer, tier)
    while result["decision"] in ("approve", "edit"):
        final_tier = policy.tier_for_call(tool=tool, args=result["args"], default_tier=spec.tier)
        if policy.tier_level(final_tier) <= policy.tier_level(decided_tier):
            break
        payload = gate_payload(
            thread_id=thread_id,
            tool=tool,
            args=result["args"],
            rationale=rationale,
            evidence=evidence or [],
            tier=final_tier,
            requested_at=str(answer.get("decided_at") or "") or requested_at,
            on_deny=on_deny,
        )
        payload = payload_confidence(payload, confidence)
        payload["recheck"] = {
            "approval_id": result["approval_id"],
            "from_tier": decided_tier,
            "decided_by": result["by"],
        }
        answer = interrupt(payload)
        result = decision_normalise(
            answer, proposed_args=result["args"], tool=tool, tier=final_tier
        )
        decided_tier = _decided_tier(answer, final_tier)
    return result


def _decided_tier(answer: Any, tier: str) -> str:
    """The tier the approval was decided in (the decision records it), else the asked tier."""
    decided = answer.get("tier") if isinstance(answer, dict) else None
    return str(decided) if decided else tier


def decision_normalise(
    answer: Any, *, proposed_args: dict[str, Any], tool: str, tier: str
) -> dict[str, Any]:
    if not isinstance(answer, dict) or answer.get("decision") not in policy.ALL_DECISIONS:
        raise DecisionError(f"not a decision: {answer!r}")
    decision = answer["decision"]
    args = proposed_args
    if decision == "edit":
        try:
            args = tool_get(tool).validate(answer.get("args") or {})
        except ValidationError as exc:
            raise DecisionError(f"edited args do not validate: {exc}") from exc
    return {
        "decision": decision,
        "args": args,
        "message": str(answer.get("message") or ""),
        "by": str(answer.get("by") or ""),
        "approval_id": answer.get("approval_id"),
        "tier": tier,
    }
