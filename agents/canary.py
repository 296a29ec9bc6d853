"""Canaries, agents' side (docs/autonomy.md).

``canary_request`` builds a planted proposal's request exactly as a real run's gate would (the
same ``gate_payload``: blast radius, on_deny line, args schema, expiry), registered as the
approvals app's provider. The ledger's side is agents/effects/canary.py.
"""

from __future__ import annotations

import uuid
from typing import Any

from agents.hitl import protocol
from agents.hitl.gate import gate_payload
from agents.hitl.on_deny import AGENT_GOES_ON
from agents.runtime.registry import UnknownAgent, agent_get


def _on_deny(agent: str) -> str:
    if agent == "incident_copilot":
        from agents.graphs.incident_copilot.graph import ON_DENY_ACTION

        return ON_DENY_ACTION
    return AGENT_GOES_ON  # the refund agent's gate middleware


def canary_request(
    *,
    agent: str,
    thread_id: str,
    tool: str,
    args: dict[str, Any],
    rationale: str,
    evidence: list[Any],
    tier: str,
    requested_at: str,
) -> dict[str, Any]:
    """The request a real run of ``agent`` pausing at ``tool`` would open (and its version)."""
    try:
        version = agent_get(agent).version
    except UnknownAgent:
        version = "1"
    payload = gate_payload(
        thread_id=thread_id,
        tool=tool,
        args=args,
        rationale=rationale,
        evidence=evidence,
        tier=tier,
        requested_at=requested_at,
        on_deny=_on_deny(agent),
    )
    item = protocol.approval_items(interrupt_id=uuid.uuid4().hex, value=payload)[0]
    return {"graph_version": version, "item": item}
