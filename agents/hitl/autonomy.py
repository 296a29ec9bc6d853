"""Graduated autonomy at the gate (docs/autonomy.md): a call whose tier requires a
person may run without waiting when an autonomy rule (sampled, post-hoc) lets it.

What the gate asks before it interrupts: the call's tier under the policy in force now, then
``approvals.autonomy.autonomy_verdict``. A call that runs is recorded once per idempotency key
(``AutonomousAction``), so a node re-run or a replay returns the same answer and records nothing
twice. Undo is compensation through the ledger (``agents.tasks.autonomous_action_undo``).
"""

from __future__ import annotations

from typing import Any

from langgraph._internal._constants import CONFIG_KEY_SCRATCHPAD
from langgraph.config import get_config

from agents.tools import tool_find, tool_list
from approvals import policy
from approvals.autonomy import autonomy_verdict, confidence_value, tool_has_compensation
from approvals.autonomy_models import AutonomousAction
from approvals.models import AgentRun
from approvals.services.autonomy_actions import autonomous_action_record


def payload_confidence(payload: dict[str, Any], confidence: Any) -> dict[str, Any]:
    """The payload with the agent's stated confidence (the reviewer sees it); unchanged (and
    its hash identical) when none, or nothing readable, was stated."""
    stated = confidence_value(confidence)
    if stated is None:
        return payload
    return {**payload, "confidence": float(stated)}


def _answered_here() -> bool:
    """Whether this node already has a person's answer to one of its interrupts (it is being
    resumed): the decision stands, whatever a rule changed since, so autonomy is not asked."""
    try:
        scratchpad = get_config()["configurable"][CONFIG_KEY_SCRATCHPAD]
    except (KeyError, RuntimeError):
        return False
    return bool(scratchpad.resume) or scratchpad.get_null_resume(False) is not None


def _decision(action: AutonomousAction) -> dict[str, Any]:
    return {
        "decision": "approve",
        "args": action.args,
        "message": "",
        "by": f"policy:{action.mode}",
        "approval_id": None,
        "tier": action.tier,
        "autonomous_action_id": action.pk,
    }


def autonomy_decision(
    *,
    thread_id: str,
    tool: str,
    args: dict[str, Any],
    default_tier: str,
    key: str | None,
    confidence: Any,
    payload: dict[str, Any],
) -> dict[str, Any] | None:
    """The gate's decision when this call runs without waiting; None: a person decides.

    Without a key nothing runs unasked (no reproducible draw, no ledger link, no undo). A call
    already recorded under its key runs as recorded (a replay after the rule changed still
    answers what it answered the first time: the effect may have run already).
    """
    if not key:
        return None
    # First: another gate of the same node may have run without waiting before this one
    # interrupted; on resume it must answer as recorded, not consume the person's answer.
    recorded = AutonomousAction.objects.filter(key=key).first()
    if recorded is not None:
        return _decision(recorded)  # an undone one is refused by the ledger, not here
    if _answered_here():
        return None
    # Only the policy in force now waives the person: the tier and the rule read fresh.
    with policy.policy_fresh():
        tier = policy.tier_for_call(tool=tool, args=args, default_tier=default_tier)
        base = policy.tier_for_call(tool=tool, args={}, default_tier=default_tier)
        raised = policy.tier_level(tier) > policy.tier_level(base)
    verdict = autonomy_verdict(tool=tool, tier=tier, key=key, confidence=confidence, raised=raised)
    if not verdict.run:
        return None
    # A call nobody can undo never runs unasked, whatever a rule says (the admin refuses such
    # rules; this holds for a tool registered, or changed, after the rule was saved).
    spec = tool_find(tool)
    if spec is None or not tool_has_compensation(tool):
        return None
    run_id = AgentRun.objects.filter(thread_id=thread_id).values_list("pk", flat=True).first()
    if run_id is None:
        return None  # not a console run (a graph driven by hand): nothing to record it on
    action = autonomous_action_record(
        run_id=run_id,
        key=key,
        tool=tool,
        tier=tier,
        args=args,
        payload=payload,
        verdict=verdict,
    )
    return _decision(action)


def tool_compensable(tool: str) -> bool:
    """The compensation provider (AgentsConfig.ready()): whether the registered tool has a
    compensating tool."""
    spec = tool_find(tool)
    return bool(spec and spec.compensate_with)


def tools_default_tiers() -> dict[str, str]:
    """The tools provider: every registered tool and its code default tier."""
    return {spec.name: spec.tier for spec in tool_list()}
