"""Step and token budgets, persisted on the run after each step so a resume never resets them."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from langchain_core.messages import BaseMessage

from approvals import services as approval_services
from approvals.models import AgentRun
from approvals.services.runs import RunProgress


class BudgetExceeded(Exception):
    """The run spent its step or token budget (kept across resumes)."""


def budget_spend(run: AgentRun, update: dict[str, Any]) -> RunProgress | None:
    """Count the steps and model tokens of one streamed update against the run's budget, and
    return the run's counters and stop signals as that update left them (one statement).

    An update LangGraph replays from a task's saved writes (``__metadata__.cached``: the task
    ran in an earlier advance whose step did not complete) was counted then: not again, and it
    is no progress (its statement only reads the signals back). An update that is no step at
    all (only the pause, ``__interrupt__``, with which the stream ends) costs no statement and
    returns None: the transition that follows it is refused for a cancelled run anyway."""
    if (update.get("__metadata__") or {}).get("cached"):
        return _progress(run, approval_services.run_budget_add(run=run))
    steps = sum(1 for node in update if node not in ("__interrupt__", "__metadata__"))
    tokens, state_tokens = _tokens_in(update), _state_tokens(update)
    if not (steps or tokens or state_tokens):
        return None
    # Graphs that keep a cumulative "tokens_used" in their state (it survives resumes
    # with the checkpoint) are the source of truth; the run mirrors it.
    return _progress(
        run,
        approval_services.run_budget_add(
            run=run, steps=steps, tokens=tokens, tokens_at_least=state_tokens
        ),
    )


def _progress(run: AgentRun, progress: RunProgress | None) -> RunProgress:
    if progress is None:
        raise AgentRun.DoesNotExist(f"run {run.pk} is gone")
    return progress


def budget_check(run: AgentRun | RunProgress) -> None:
    """Raise BudgetExceeded when the stored counters passed the limits."""
    if run.steps_used > settings.RUN_MAX_STEPS:
        raise BudgetExceeded(f"step budget exhausted ({run.steps_used} > {settings.RUN_MAX_STEPS})")
    if run.tokens_used > settings.RUN_MAX_TOKENS:
        raise BudgetExceeded(
            f"token budget exhausted ({run.tokens_used} > {settings.RUN_MAX_TOKENS})"
        )


def _state_tokens(update: dict[str, Any]) -> int:
    """The largest cumulative ``tokens_used`` a step wrote to the state (0 if none)."""
    values = [
        node_update["tokens_used"]
        for node_update in update.values()
        if isinstance(node_update, dict) and isinstance(node_update.get("tokens_used"), int)
    ]
    return max(values, default=0)


def _tokens_in(update: dict[str, Any]) -> int:
    """Model tokens reported by the messages (usage_metadata) a step added to the state."""
    total = 0
    for node_update in update.values():
        if not isinstance(node_update, dict):
            continue
        for value in node_update.values():
            for item in value if isinstance(value, list) else [value]:
                usage = (
                    item.usage_metadata
                    if isinstance(item, BaseMessage) and hasattr(item, "usage_metadata")
                    else None
                )
                if usage:
                    total += int(usage.get("total_tokens", 0))
    return total
