"""Scripted downstream systems for the ledger's fault-injection tests (the one patch point per
downstream call is the tool's ``run``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from agents.effects.errors import ToolTimeout
from agents.tools import ToolSpec, tool_register


class PayArgs(BaseModel):
    amount: int


class KeylessProvider:
    """Cannot take the idempotency key and cannot be asked: every call that arrives pays.

    ``script`` says what the next calls do: "act_then_timeout" pays, then the answer is lost.
    """

    def __init__(self, *script: str) -> None:
        self.payments: list[int] = []
        self.script = list(script)

    def run(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        self.payments.append(args["amount"])
        if self.script and self.script.pop(0) == "act_then_timeout":
            raise ToolTimeout("acted, then the answer was lost")
        return {"paid": args["amount"]}


def keyless_tool_register(name: str, provider: KeylessProvider) -> None:
    """Register ``provider`` as a write tool that does not take the key (at most once)."""
    tool_register(
        ToolSpec(
            name=name,
            description=name,
            args_model=PayArgs,
            tier="write",
            run=provider.run,
            takes_key=False,
        )
    )
