"""Tool registry: name, pydantic args schema, default risk tier, blast radius, what a denial
means, compensation.

Tiers: ``read`` (runs freely), ``write`` and ``critical`` (need approval unless policy says
otherwise). The args schema is the single source for validating model-proposed args, edited
args from reviewers, and the edit form the console renders.

Tools register themselves when their module is imported; the app registers the sandbox's demo
tools at start-up (``AgentsConfig.ready``), so every process knows them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

TIERS = ("read", "write", "critical")
TIER_LEVEL = {"read": 0, "write": 1, "critical": 2}

# run(args, idempotency_key) -> JSON-serialisable result. Read tools get key None.
ToolFunc = Callable[[dict[str, Any], str | None], dict[str, Any]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    args_model: type[BaseModel]
    tier: str
    run: ToolFunc
    # One line saying what the action touches; may use {arg} placeholders.
    blast_radius: str = ""
    # One line saying what a rejection means for the world (what does not happen); may use
    # {arg} placeholders. The gate adds what the run does next (agents/hitl/on_deny.py).
    on_deny: str = ""
    # Name of the tool that undoes this one (saga compensation), if any.
    compensate_with: str | None = None
    # Builds the compensating tool's args from this tool's args and result.
    compensation_args: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None
    # Asks the downstream what happened under an idempotency key, as real providers let you:
    # the stored result, or None when it never acted. Settles effects in doubt (invariant 13).
    lookup: Callable[[str], dict[str, Any] | None] | None = None
    # A saga: the tools of its steps, each run under the key ``<call key>:<step>``. An
    # autonomous call's undo compensates them (agents/autonomy_undo.py); another effect whose
    # key merely starts with the call's key (a later notification) is not one of them.
    saga_steps: tuple[str, ...] = ()
    # Whether the downstream receives (and dedupes on) the idempotency key. A tool that cannot
    # is called at most once: never retried, never called again on a replay (invariant 13).
    takes_key: bool = True

    @property
    def has_side_effects(self) -> bool:
        return self.tier != "read"

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Validated, normalised args; raises pydantic.ValidationError."""
        return self.args_model.model_validate(args).model_dump(mode="json")

    def describe_blast_radius(self, args: dict[str, Any]) -> str:
        try:
            return self.blast_radius.format(**args)
        except (KeyError, IndexError, ValueError):
            return self.blast_radius

    def describe_on_deny(self, args: dict[str, Any]) -> str:
        """``on_deny`` with the call's args; a placeholder without its arg stays as written."""
        return _fill(self.on_deny, args)

    def args_schema(self) -> dict[str, Any]:
        return self.args_model.model_json_schema()


class _Placeholders(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _fill(template: str, args: dict[str, Any]) -> str:
    try:
        return template.format_map(_Placeholders(args))
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        return template


_tools: dict[str, ToolSpec] = {}


class UnknownTool(LookupError):
    pass


def tool_register(spec: ToolSpec) -> ToolSpec:
    if spec.tier not in TIERS:
        raise ValueError(f"tool {spec.name}: tier must be one of {TIERS}, got {spec.tier!r}")
    _tools[spec.name] = spec
    return spec


def tool_unregister(name: str) -> None:
    """Forget a tool (tests that register their own)."""
    _tools.pop(name, None)


def tool_get(name: str) -> ToolSpec:
    try:
        return _tools[name]
    except KeyError:
        raise UnknownTool(f"unknown tool {name!r}") from None


def tool_find(name: str) -> ToolSpec | None:
    return _tools.get(name)


def tool_list() -> list[ToolSpec]:
    return sorted(_tools.values(), key=lambda spec: spec.name)


def validation_errors(exc: ValidationError) -> dict[str, str]:
    """{field: message} from a pydantic error, for forms and 400 responses."""
    errors: dict[str, str] = {}
    for err in exc.errors():
        field = ".".join(str(part) for part in err.get("loc", ())) or "non_field_errors"
        errors.setdefault(field, err.get("msg", "invalid"))
    return errors


def tool_names() -> list[str]:
    """The registered tools' names (the admin validates tool policies against them)."""
    return sorted(_tools)


def tool_arg_names(name: str) -> list[str] | None:
    """The top-level argument names of a registered tool (None: no such tool); the admin
    validates tool policy rules against them."""
    spec = _tools.get(name)
    if spec is None:
        return None
    return sorted(spec.args_schema().get("properties", {}))
