"""What the offline model answers for the incident copilot's prompts (no network needed)."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage

from agents.runtime.llm import OfflineReply, json_block, message_text


def incident_responder(messages: list[BaseMessage], tools: list[str]) -> OfflineReply:
    """sev1/sev2 with a deploy in the last 24 h: roll it back; otherwise open a ticket."""
    prompt = next((message_text(m) for m in reversed(messages) if isinstance(m, HumanMessage)), "")
    facts = json_block(prompt)
    if not facts:
        return "I need the incident facts to propose an action.", []
    service, severity, signal = facts["service"], facts["severity"], facts["signal"]
    deploys = facts.get("recent_deploys") or []
    latest = deploys[0] if deploys else None
    can_roll_back = bool(
        latest and latest.get("previous_version") and not latest.get("is_rollback")
    )
    if severity in ("sev1", "sev2") and can_roll_back and "rollback_deploy" in tools:
        return (
            f"{service} was deployed at {latest['deployed_at']} ({latest['version']}) and the "
            f"{severity} signal started after it; rolling back to {latest['previous_version']} is "
            "the fastest way to stop the impact.",
            [
                {
                    "name": "rollback_deploy",
                    "args": {
                        "service": service,
                        "from_version": latest["version"],
                        "to_version": latest["previous_version"],
                    },
                }
            ],
        )
    metrics = facts.get("metrics", {})
    return (
        f"No recent deploy to blame at {severity}; a ticket lets the owning team investigate.",
        [
            {
                "name": "create_incident_ticket",
                "args": {
                    "service": service,
                    "title": f"{severity} {service}: {signal}"[:300],
                    "severity": severity,
                    "body": (
                        f"Signal: {signal}\nError rate: {metrics.get('error_rate_pct')}%\n"
                        f"p95 latency: {metrics.get('p95_latency_ms')} ms"
                    ),
                },
            }
        ],
    )
