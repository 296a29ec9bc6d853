"""Prompts of the incident copilot."""

from __future__ import annotations

import json
from typing import Any

SYSTEM_PROMPT = """You are an incident copilot for an on-call engineer.
Given an incident and the evidence gathered, propose exactly ONE action by calling one tool:
- rollback_deploy when the incident is sev1 or sev2 and a deploy of the service in the last
  24 hours is the likely cause (roll back from its version to its previous version);
- create_incident_ticket otherwise.
Explain your reasoning in one or two sentences in the message text. A person approves the
action before it runs."""


def proposal_prompt(
    *, incident: dict[str, Any], findings: dict[str, Any], evidence: list[str]
) -> str:
    facts = {
        "service": incident["service"],
        "signal": incident["signal"],
        "severity": incident["severity"],
        "recent_deploys": findings.get("deploys", []),
        "metrics": findings.get("metrics", {}),
    }
    lines = "\n".join(f"- {line}" for line in evidence)
    return (
        f"Incident on {incident['service']} ({incident['severity']}): {incident['signal']}\n"
        f"Evidence:\n{lines}\n\nFacts:\n```json\n{json.dumps(facts, sort_keys=True)}\n```"
    )


def notify_message(*, incident: dict[str, Any], outcome: dict[str, Any]) -> str:
    head = f"[{incident['severity']}] {incident['service']}: {incident['signal']}."
    status = outcome["status"]
    if status == "executed":
        return f"{head} Done after approval: {outcome['tool']} {json.dumps(outcome['args'], sort_keys=True)}."
    if status == "undone":
        return f"{head} Proposed {outcome['tool']} was undone on review before it ran; nothing changed."
    if status == "rejected":
        reason = f" Reason: {outcome['message']}" if outcome.get("message") else ""
        return f"{head} Proposed {outcome['tool']} was rejected by {outcome['by'] or 'a reviewer'}.{reason}"
    return f"{head} {outcome['by'] or 'A reviewer'} answered instead of running {outcome['tool']}: {outcome['message']}"
