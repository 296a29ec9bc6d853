from __future__ import annotations

import importlib

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents and sandboxes"

    def ready(self) -> None:
        # Every process (web, worker, command) knows the demo tools and the built-in agents:
        # both register themselves on import. Agents of the CONSOLE_AGENTS setting are
        # imported on first use (agents.runtime.registry).
        importlib.import_module("agents.sandbox.tools")
        importlib.import_module("agents.graphs")
