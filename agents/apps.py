from __future__ import annotations

import importlib
from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _checkpointer_setup(sender: AppConfig, using: str = "default", **kwargs: Any) -> None:
    """``manage.py migrate`` also creates (or upgrades) the checkpointer's tables."""
    from agents.runtime.checkpoint import checkpointer_setup

    checkpointer_setup(using=using)


def _erasure_grant(sender: AppConfig, using: str = "default", **kwargs: Any) -> None:
    """The compliance group may erase; its migration grants it, this keeps it after a test
    flush (which empties the auth tables and emits post_migrate again)."""
    from agents.erasure import compliance_erase_grant

    compliance_erase_grant(using=using)


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents and sandboxes"

    def ready(self) -> None:
        # Every process (web, worker, command) knows the demo tools and the built-in agents:
        # both register themselves on import. Agents of the CONSOLE_AGENTS setting are
        # imported on first use (agents.runtime.registry).
        importlib.import_module("agents.sandbox.tools")
        importlib.import_module("agents.graphs")
        # approvals/ tells reviewers what changed while an approval waited, from these.
        from agents.runtime.current import registry_current
        from approvals.changes import changes_provider_set

        changes_provider_set(registry_current)
        # ... and which approvals' decisions never reached an external agent (no outcome due).
        from agents.remote.selectors import remote_told_expression
        from approvals.services.outcomes import outcome_told_provider_set

        outcome_told_provider_set(remote_told_expression)
        # ... and which approved actions' agents cannot report an outcome (Agent Server).
        from agents.remote.selectors import remote_connector_told_expression
        from approvals.services.stuck import stuck_outcome_exempt_provider_set

        stuck_outcome_exempt_provider_set(remote_connector_told_expression)
        # ... and whether a tool can be undone (a compensating tool), and which tools exist with
        # their code default tier: no autonomy rule for what nobody can undo.
        from agents.hitl.autonomy import tool_compensable, tools_default_tiers
        from approvals.autonomy import compensation_provider_set, tools_provider_set

        compensation_provider_set(tool_compensable)
        tools_provider_set(tools_default_tiers)
        # ... and the canary planter: the agent's own graph run to its gate (a scripted model).
        from agents.canary import canary_plant_run
        from approvals.canary_templates import canary_planter_set

        canary_planter_set(canary_plant_run)
        post_migrate.connect(_checkpointer_setup, sender=self)
        post_migrate.connect(_erasure_grant, sender=self, dispatch_uid="agents_erasure_grant")
