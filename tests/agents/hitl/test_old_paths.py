"""Agent code written against the paths the README documented before the rooms keeps working
(found by the hostile review of the restructuring)."""

from __future__ import annotations

import importlib

import pytest

OLD_NAMES = [
    ("agents.ledger", "effect_execute"),
    ("agents.ledger", "ToolError"),
    ("agents.ledger", "RetryableToolError"),
    ("agents.ledger", "run_compensate"),
    ("agents.ledger", "effect_get"),
    ("agents.registry", "agent_register"),
    ("agents.registry", "AgentSpec"),
    ("agents.llm", "chat_model_get"),
    ("agents.llm", "OfflineChatModel"),
    ("agents.gate", "approval_gate"),
    ("agents.gate", "PAYLOAD_TYPE"),
    ("agents.gate", "decision_normalise"),
    ("agents.middleware", "ConsoleGateMiddleware"),
    ("agents.middleware", "ApprovalGateMiddleware"),
    ("agents.middleware", "console_tool"),
    ("agents.middleware", "ToolRisk"),
    ("agents.middleware", "gate_decision"),
    ("agents.middleware", "GateState"),
    ("agents.middleware", "DECISIONS_KEY"),
    ("agents.middleware", "IDEMPOTENCY_ARG"),
    ("agents.middleware", "DEFAULT_TIER"),
    ("agents.tools", "ToolSpec"),
    ("agents.tools", "tool_register"),
]


@pytest.mark.parametrize(("module", "name"), OLD_NAMES)
def test_a_name_documented_before_still_imports(module, name):
    assert getattr(importlib.import_module(module), name) is not None
