"""Agent registry: (name, version) -> graph factory.

Agents register in code (``agent_register``) or through the ``CONSOLE_AGENTS`` setting
(``{"name": "dotted.module:factory"}``), so users plug in their own graphs. A factory takes
``checkpointer=`` and returns a compiled LangGraph graph.

Version policy (invariant 8): when a thread checkpointed under an older version resumes,
``drain`` runs it on the old version (which must stay registered), ``migrate`` runs it on the
current version after transforming its state with ``migrate(values, from_version)``.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from django.conf import settings
from pydantic import BaseModel

GraphFactory = Callable[..., Any]
Migration = Callable[[dict[str, Any], str], dict[str, Any]]


class UnknownAgent(LookupError):
    """The agent (or that version of it) is not registered."""


@dataclass(frozen=True)
class AgentSpec:
    name: str
    version: str
    factory: GraphFactory
    description: str = ""
    input_model: type[BaseModel] | None = None
    policy: Literal["drain", "migrate"] = "drain"
    migrate: Migration | None = None
    # Builds the graph's first input from the validated run input (default: the input as is).
    make_input: Callable[[dict[str, Any]], Any] | None = None
    example_input: dict[str, Any] = field(default_factory=dict)
    # Input keys that name a data subject, and its kind ({"customer_email": "email"}): the
    # blind index finds the runs to erase by it (agents/subjects.py). E-mail addresses anywhere
    # in the input are indexed even when undeclared.
    subjects: dict[str, str] = field(default_factory=dict)

    def validate_input(self, raw: Any) -> dict[str, Any]:
        """Validated input, or pydantic.ValidationError naming the bad field."""
        if self.input_model is None:
            if not isinstance(raw, dict):
                raise TypeError("input must be a JSON object")
            return raw
        return self.input_model.model_validate(raw).model_dump(mode="json")

    def input_schema(self) -> dict[str, Any] | None:
        """The JSON schema of the input (None: the agent declares none, or pydantic cannot
        describe its model); the start form generates its inputs from it."""
        if self.input_model is None:
            return None
        try:
            schema = self.input_model.model_json_schema()
        except Exception:  # noqa: BLE001 - an odd model falls back to the JSON box
            log.warning("the input schema of agent %s cannot be generated", self.name)
            return None
        return schema if isinstance(schema.get("properties"), dict) else None

    def graph_input(self, run_input: dict[str, Any]) -> Any:
        return self.make_input(run_input) if self.make_input else run_input


_lock = threading.Lock()
_agents: dict[str, dict[str, AgentSpec]] = {}
_current: dict[str, str] = {}
_settings_loaded = False
# CONSOLE_AGENTS entries that failed to import in this process: name -> why (see agent_get).
_broken: dict[str, str] = {}

log = logging.getLogger(__name__)


def agent_register(spec: AgentSpec, *, current: bool = True) -> AgentSpec:
    """Register a version of an agent; ``current`` makes new runs use it."""
    with _lock:
        _agents.setdefault(spec.name, {})[spec.version] = spec
        if current or spec.name not in _current:
            _current[spec.name] = spec.version
    return spec


def agent_unregister(name: str, version: str | None = None) -> None:
    """Remove a version (or the whole agent). Tests use it to simulate a deploy."""
    with _lock:
        if version is None:
            _agents.pop(name, None)
            _current.pop(name, None)
            return
        versions = _agents.get(name, {})
        versions.pop(version, None)
        if _current.get(name) == version:
            if versions:
                _current[name] = sorted(versions)[-1]
            else:
                _current.pop(name, None)
                _agents.pop(name, None)


def _load_settings() -> None:
    """Register the agents of the CONSOLE_AGENTS setting, once per process (the built-in
    agents register themselves when ``agents.graphs`` is imported, at app start-up)."""
    global _settings_loaded
    if _settings_loaded:
        return
    _settings_loaded = True
    _broken.clear()
    for name, target in getattr(settings, "CONSOLE_AGENTS", {}).items():
        try:
            agent_register(_spec_from_setting(name, target))
        except Exception as exc:  # noqa: BLE001 - one broken agent must not hide the others
            # Its runs are flagged with this reason (UnknownAgent), and a start is a 400 naming
            # it; the other agents load as usual. A deploy that fixes the module fixes it.
            _broken[name] = f"{type(exc).__name__}: {exc}"
            log.exception("CONSOLE_AGENTS[%r] could not be loaded", name)


def _spec_from_setting(name: str, target: Any) -> AgentSpec:
    if isinstance(target, str):
        target = {"factory": target}
    factory = import_dotted(target["factory"])
    input_model = import_dotted(target["input"]) if target.get("input") else None
    return AgentSpec(
        name=name,
        version=str(target.get("version", "1")),
        factory=factory,
        description=target.get("description", ""),
        input_model=input_model,
        subjects=_subjects_setting(name, target.get("subjects") or {}),
    )


def _subjects_setting(name: str, subjects: Any) -> dict[str, str]:
    """A CONSOLE_AGENTS entry's ``"subjects"``: ``{input key: kind}``, kinds as text."""
    if not isinstance(subjects, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in subjects.items()
    ):
        raise ValueError(
            f'CONSOLE_AGENTS[{name!r}]["subjects"] must map input keys to kinds, '
            'e.g. {"customer_email": "email"}'
        )
    return dict(subjects)


def import_dotted(path: str) -> Any:
    """Import ``"package.module:attribute"`` (or ``"package.module.attribute"``)."""
    module_name, _, attr = path.partition(":") if ":" in path else path.rpartition(".")
    module = importlib.import_module(module_name)
    return getattr(module, attr)


def agent_get(name: str, version: str | None = None) -> AgentSpec:
    _load_settings()
    versions = _agents.get(name)
    if not versions:
        if name in _broken:
            raise UnknownAgent(f"agent {name!r} could not be loaded: {_broken[name]}")
        raise UnknownAgent(f"unknown agent {name!r}")
    version = version or _current[name]
    try:
        return versions[version]
    except KeyError:
        raise UnknownAgent(f"agent {name!r} has no registered version {version!r}") from None


def agent_is_registered(name: str, version: str) -> bool:
    _load_settings()
    return version in _agents.get(name, {})


def agent_list() -> list[AgentSpec]:
    """The current version of every registered agent, by name."""
    _load_settings()
    return [_agents[name][_current[name]] for name in sorted(_current)]
