"""Input and state of the incident copilot. State values stay plain JSON (dicts, lists, str)."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from pydantic import BaseModel, Field


class IncidentInput(BaseModel):
    """What starts a run: which service, what was seen, how bad it is."""

    service: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,99}$", description="Service name")
    signal: str = Field(min_length=3, max_length=500, description="What the alert says")
    severity: Literal["sev1", "sev2", "sev3", "sev4"]


class IncidentState(TypedDict, total=False):
    service: str
    """The affected service (from the input)."""

    signal: str
    """The alert or symptom that started the run (from the input)."""

    severity: str
    """sev1 (worst) to sev4 (from the input)."""

    findings: dict[str, Any]
    """Raw results of the read tools: {"metrics": ..., "logs": ..., "deploys": ...}."""

    evidence: list[str]
    """One line per finding, shown to the reviewer and kept in the audit trail."""

    proposal: dict[str, Any]
    """The model's proposed action: tool, args, rationale, tool_call_id, requested_at."""

    tokens_used: int
    """Tokens the model used for the proposal (from usage_metadata)."""

    decision: dict[str, Any]
    """The gate's answer: decision, args, message, by, approval_id, tier."""

    outcome: dict[str, Any]
    """What happened: executed (with the result), rejected or responded."""

    notification: dict[str, Any]
    """The sandbox notifier's answer for the incident channel message."""

    summary: str
    """The message posted to the incident channel."""
