"""The approval contract: the shapes approvals/ shares with the agents that pause for it.

approvals/ owns these and never imports agents/; agents/ imports them.

- ``PAYLOAD_TYPE`` marks a payload the console understands (a tool call with its args, why,
  blast radius and args schema); any other payload is shown raw and answered in words.
- ``decision_value()`` is the value a decided approval stores and the run resumes with.
- ``RUN_ADVANCE_TASK`` is the task that moves a run on; approvals/ enqueues it by name.
- ``AUTONOMY_UNDO_TASK`` compensates an action that ran without waiting (a reviewer's undo).
- ``schema_ref_resolve()`` follows the local ``$ref`` of a JSON schema carried in a payload.
- ``payload_on_deny()`` is the payload's "what happens if denied" line (``on_deny``), or what
  the console knows without one.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

PAYLOAD_TYPE = "console.approval"
RUN_ADVANCE_TASK = "agents.tasks.run_advance"
AUTONOMY_UNDO_TASK = "agents.tasks.autonomous_action_undo"
TIMEOUT_ACTOR = "system:timeout"
CANCEL_ACTOR = "system:cancel"
# Runs of agents that run in their own service (agents/remote/): "external:<name>".
EXTERNAL_AGENT_PREFIX = "external:"


def is_external_agent(agent: str) -> bool:
    """Whether a run's agent runs outside the console (never advanced by the in-process runner)."""
    return agent.startswith(EXTERNAL_AGENT_PREFIX)


def approval_idempotency_key(*, thread_id: str, interrupt_id: str, action_index: int) -> str:
    """The key the console issues for one approved action: the executed call carries it
    downstream and back in its outcome report. Deterministic (a retry gets the same)."""
    digest = hashlib.sha256(f"{thread_id}:{interrupt_id}:{action_index}".encode()).hexdigest()
    return "cak_" + digest[:40]


# A payload without an on_deny line (an agent that predates it, or its own client): what is true
# of every path the console resumes.
ON_DENY_UNKNOWN = (
    "The action is not taken; the agent gets your decision (with your reason) and decides what "
    "to do next."
)

# A chain of $refs longer than this is treated as a cycle (a broken schema must not hang).
_REF_DEPTH = 20


def is_console_payload(value: Any) -> bool:
    """Whether an interrupt's value (or a stored payload) is the console's own structured one."""
    return isinstance(value, dict) and value.get("type") == PAYLOAD_TYPE


def payload_on_deny(payload: Any) -> str:
    """What happens if the reviewer rejects: the payload's ``on_deny``, else ``ON_DENY_UNKNOWN``."""
    line = payload.get("on_deny") if isinstance(payload, dict) else None
    return line.strip() if isinstance(line, str) and line.strip() else ON_DENY_UNKNOWN


def decision_value(
    *,
    decision: str,
    args: dict[str, Any],
    message: str,
    by: str,
    approval_id: int,
    tier: str,
    policy_version: int,
    decided_at: dt.datetime,
) -> dict[str, Any]:
    """The resume value of a closed approval (stored in ``ApprovalRequest.decision``).

    The gate reads every key back (``agents.hitl.gate.decision_normalise``); LangChain HITL
    decisions are built from it (``agents.hitl.protocol.hitl_decision``).
    """
    return {
        "decision": decision,
        "args": args,
        "message": message,
        "by": by,
        "approval_id": approval_id,
        "tier": tier,
        "policy_version": policy_version,
        "decided_at": decided_at.isoformat(),
    }


def schema_ref_resolve(root: Any, node: Any, *, with_siblings: bool = False) -> Any:
    """``node`` with its local ``#/...`` ``$ref`` chain followed within ``root``.

    By default the target replaces the node: keywords beside a ``$ref`` are dropped, so a
    schema used for validation can never be weakened by a sibling ``required`` or
    ``properties`` (in JSON Schema both would apply). ``with_siblings`` lays them over the
    target instead, for display (a field's ``title``, ``description`` or ``default`` beside its
    ``$ref``). A reference that is not local, that points nowhere, or that cycles leaves the node
    as it is.
    """
    for _ in range(_REF_DEPTH):
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return node
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        if target is None:
            return node
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        merge = with_siblings and isinstance(target, dict) and siblings
        node = {**target, **siblings} if merge else target
    return node
