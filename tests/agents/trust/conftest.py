"""Trust tests use the runtime's small test agent, a keyless payment whose answer is lost once,
and a payment provider that can act late (tests/support/pay_agents.py)."""

from __future__ import annotations

import pytest

from agents.effects import ledger
from agents.runtime.registry import agent_unregister
from agents.tools import ToolSpec, tool_register, tool_unregister
from tests.agents.runtime.conftest import note_agent  # noqa: F401
from tests.support.pay_agents import LateProvider, pay_agent_register
from tests.support.providers import KeylessProvider, PayArgs, keyless_tool_register


@pytest.fixture
def keyless_agent(settings, monkeypatch):
    """A keyless payment that pays, then its answer is lost (once)."""
    settings.TOOL_MAX_RETRIES = 0
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)
    downstream = KeylessProvider("act_then_timeout")
    keyless_tool_register("kpay", downstream)
    spec = pay_agent_register("kpay")
    yield spec, downstream
    agent_unregister(spec.name)
    tool_unregister("kpay")


@pytest.fixture
def late(settings, monkeypatch):
    settings.TOOL_MAX_RETRIES = 0
    settings.TOOL_TIMEOUT_SECONDS = 0.5
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)
    provider = LateProvider()
    tool_register(
        ToolSpec(
            name="lpay",
            description="pay",
            args_model=PayArgs,
            tier="write",
            run=provider.run,
            lookup=provider.lookup,
            compensate_with="lpay_undo",
        )
    )
    tool_register(
        ToolSpec(
            name="lpay_undo",
            description="undo",
            args_model=PayArgs,
            tier="write",
            run=provider.undo,
            lookup=lambda key: None,
        )
    )
    yield provider
    tool_unregister("lpay")
    tool_unregister("lpay_undo")
