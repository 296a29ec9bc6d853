"""Reads for the ops page: the retention policies in force, what passes did, the table sizes."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db.models import Count

from agents.retention_models import PrunedRun, RetentionAction, RetentionPass
from agents.runtime import retention_sql
from agents.runtime.registry import agent_list
from agents.runtime.retention import retention_candidates, retention_default, retention_policies

log = logging.getLogger(__name__)

SCHEDULE_FUNC = "agents.tasks.checkpoints_prune"


def retention_policies_in_force() -> list[dict[str, Any]]:
    """One row per registered agent (and per policy of an agent no longer registered)."""
    policies = retention_policies()
    registered = {spec.name for spec in agent_list()}
    rows = []
    for agent in sorted(registered | set(policies)):
        policy = policies.get(agent) or retention_default()
        rows.append(
            {
                "agent": agent,
                "keep_days": policy.keep_days,
                "action": RetentionAction(policy.action).label,
                "source": "policy" if policy.explicit else "default",
                "registered": agent in registered,
            }
        )
    return rows


def retention_summary() -> dict[str, Any]:
    """Runs pruned so far by outcome, the last passes, the runs due now, the schedule."""
    from django_q.models import Schedule

    by_outcome = dict(
        PrunedRun.objects.values_list("outcome").annotate(n=Count("run_id")).order_by()
    )
    schedule = Schedule.objects.filter(func=SCHEDULE_FUNC).first()
    return {
        "default": retention_default(),
        "default_action": RetentionAction(settings.CHECKPOINT_RETENTION_ACTION).label,
        "batch": settings.CHECKPOINT_PRUNE_BATCH,
        "pruned": {outcome: by_outcome.get(outcome, 0) for outcome in PrunedRun.Outcome.values},
        "passes": list(RetentionPass.objects.all()[:5]),
        "due": len(retention_candidates()),
        "next_run": schedule.next_run if schedule else None,
    }


def checkpoint_storage() -> dict[str, Any]:
    """The checkpoint tables (and SQLite's files); an error line instead when unreadable."""
    try:
        tables = retention_sql.checkpoint_tables()
        files = retention_sql.checkpoint_files()
    except Exception as exc:  # noqa: BLE001 - the page must still show the rest
        log.exception("checkpoint table sizes could not be read")
        return {"tables": [], "files": [], "error": f"{type(exc).__name__}: {exc}"}
    sized = [t["bytes"] for t in tables if t["bytes"] is not None] + [f["bytes"] for f in files]
    return {"tables": tables, "files": files, "total_bytes": sum(sized), "error": ""}
