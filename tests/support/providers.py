"""Scripted downstream systems for the ledger's fault-injection tests (the one patch point per
downstream call is the tool's ``run``), and faults injected in front of registered tools."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from agents.effects.errors import ToolTimeout
from agents.tools import ToolSpec, tool_get, tool_register

FAULTS = (
    "timeout_after_acting",
    "timeout_before_acting",
    "killed_after_acting",
    "killed_before_acting",
)


class WorkerKilled(BaseException):
    """The worker died mid-call (SIGKILL, or django-q2's task timeout: not an ``Exception``)."""


@contextlib.contextmanager
def faults_injected(*tools: str) -> Iterator[dict[str, str]]:
    """Put a fault in front of each tool's ``run``: ``armed[thread_id] = fault`` (one of
    ``FAULTS``) makes that run's next call of one of them time out or kill the worker, before or
    after the downstream acted, once."""
    armed: dict[str, str] = {}

    def faulty(real: Any) -> Any:
        def run(args: dict[str, Any], key: str | None) -> dict[str, Any]:
            fault = armed.pop(str(key).split(":")[0], "")  # keys are "<thread id>:..."
            timeout = fault.startswith("timeout")
            if "before" in fault:
                raise ToolTimeout("no answer") if timeout else WorkerKilled()
            result = real(args, key)
            if fault:
                raise ToolTimeout("acted, then the answer was lost") if timeout else WorkerKilled()
            return result

        return run

    originals = [tool_get(name) for name in tools]
    for spec in originals:
        tool_register(dataclasses.replace(spec, run=faulty(spec.run)))
    try:
        yield armed
    finally:
        for spec in originals:
            tool_register(spec)


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
