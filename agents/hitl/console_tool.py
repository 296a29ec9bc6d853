"""Declaring your own LangChain tools to the console: ``console_tool`` and ``ToolRisk``.

A declared tool is registered in the console's tool registry (``agents.tools``) when its module
is imported, so policies, the ledger and compensation find it in every process.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, create_model

from agents.runtime.llm import message_text
from agents.tools import ToolFunc, ToolSpec, tool_find, tool_register

IDEMPOTENCY_ARG = "idempotency_key"
DEFAULT_TIER = "write"


@dataclass(frozen=True)
class ToolRisk:
    """What the console needs to know about one of your tools, declared in code."""

    tier: str = DEFAULT_TIER
    """Default risk tier (read, write, critical); a ToolPolicy in the admin overrides it."""

    blast_radius: str = ""
    """One line saying what the call touches; ``{arg}`` placeholders take the call's args."""

    on_deny: str = ""
    """One line saying what a rejection means (what does not happen); ``{arg}`` placeholders
    take the call's args. The console adds what the agent does next."""

    compensate_with: str | None = None
    """The registered tool that undoes this one (called with the same args, under the key
    ``<key>:compensate``); without it no autonomy rule lets the tool run without waiting."""


_adapted: dict[str, BaseTool] = {}
_adapted_lock = threading.Lock()


def tool_is_adapted(name: str) -> bool:
    """Whether ``name`` is a LangChain tool registered through ``tool_adapt``."""
    return name in _adapted


def console_tool(
    *,
    tier: str = DEFAULT_TIER,
    blast_radius: str = "",
    on_deny: str = "",
    compensate_with: str | None = None,
) -> Callable[[BaseTool], BaseTool]:
    """Decorator (over ``@tool``) declaring a tool's tier, blast radius and what a rejection
    means to the console.

    The tool is registered in ``agents.tools`` when its module is imported, so policies,
    the ledger and compensation find it in every process, and is returned unchanged.
    """

    def declare(tool: BaseTool) -> BaseTool:
        risk = ToolRisk(
            tier=tier, blast_radius=blast_radius, on_deny=on_deny, compensate_with=compensate_with
        )
        tool_adapt(tool, risk=risk, replace=True)
        return tool

    return declare


def tool_adapt(tool: BaseTool, *, risk: ToolRisk | None = None, replace: bool = False) -> ToolSpec:
    """Register a LangChain tool as a console ``ToolSpec`` (args model from its schema).

    The spec's ``run`` invokes the tool with the approved args, plus the ledger's idempotency
    key as ``idempotency_key`` when the tool declares that argument (hide it from the model
    with ``Annotated[str, InjectedToolArg]``) so the downstream can dedupe. A tool adapted
    before keeps its declared risk unless ``replace``. A name already used by a console tool
    that is not an adapted LangChain tool is an error.
    """
    with _adapted_lock:
        existing = tool_find(tool.name)
        if existing is not None and tool.name not in _adapted:
            raise ValueError(f"tool name {tool.name!r} is already a console tool; rename your tool")
        if existing is not None and not replace:
            if _adapted[tool.name] is not tool:
                _adapted[tool.name] = tool
                kept = ToolRisk(
                    existing.tier, existing.blast_radius, existing.on_deny, existing.compensate_with
                )
                existing = tool_register(_spec_for(tool, kept))
            return existing
        risk = risk or ToolRisk()
        _adapted[tool.name] = tool
        return tool_register(_spec_for(tool, risk))


def _spec_for(tool: BaseTool, risk: ToolRisk) -> ToolSpec:
    return ToolSpec(
        name=tool.name,
        description=tool.description,
        args_model=_args_model(tool),
        tier=risk.tier,
        run=_tool_runner(tool.name),
        blast_radius=risk.blast_radius,
        on_deny=risk.on_deny,
        compensate_with=risk.compensate_with,
        # Without an idempotency_key argument the downstream cannot dedupe: at most once.
        takes_key=IDEMPOTENCY_ARG in tool.get_input_schema().model_fields,
    )


def _args_model(tool: BaseTool) -> type[BaseModel]:
    """The args the model may send (``tool_call_schema``: injected args left out)."""
    schema = tool.tool_call_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema
    # A JSON-schema tool: accept any object; the tool checks its own args when it runs.
    return create_model(f"{tool.name}_args", __config__=ConfigDict(extra="allow"))


def _tool_runner(name: str) -> ToolFunc:
    def run(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        tool = _adapted[name]
        call_args = dict(args)
        if key is not None and IDEMPOTENCY_ARG in tool.get_input_schema().model_fields:
            call_args[IDEMPOTENCY_ARG] = key
        output = tool.invoke(call_args)
        if isinstance(output, ToolMessage):
            output = message_text(output)
        return {"output": json.loads(json.dumps(output, default=str))}

    return run
