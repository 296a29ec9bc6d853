"""When a call may start inside an advance: the advance's deadline, read from the graph config
the runner set ("deadline"), and the calls deferred to the next task once already."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings

from agents.models import Effect
from audit.models import AuditEvent


def run_config_value(name: str) -> Any:
    """What the runner put in the graph config ("lease_owner", "deadline"), inside a run."""
    try:
        from langgraph.config import get_config

        return get_config().get("configurable", {}).get(name)
    except RuntimeError:  # not inside a graph (compensation, tests): nothing to fence
        return None


def short_of_time() -> bool:
    """Inside a run: less time is left before the advance's deadline than a call may need
    (its timeout, or half an advance when the timeout is longer)."""
    deadline = run_config_value("deadline")
    if deadline is None:
        return False
    needed = min(settings.TOOL_TIMEOUT_SECONDS, settings.RUN_ADVANCE_DEADLINE_SECONDS / 2)
    return deadline - time.time() < needed


def deferred_before(run_id: str, key: str) -> bool:
    """Deferred once already (its node is slow before the call): no second time, or a slow
    node would never make its call."""
    return AuditEvent.objects.filter(
        run_id=run_id, action="run.continued", data__deferred_key=key
    ).exists()


def already_done(key: str) -> bool:
    return Effect.objects.filter(
        key=key, status__in=(Effect.Status.SUCCEEDED, Effect.Status.COMPENSATED)
    ).exists()
