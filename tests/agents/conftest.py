"""Helpers for the agents domain tests: a run row for the effects ledger to point at."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from approvals.models import AgentRun
from tests import audit_purge

# Graph and ledger tests are transactional (tools run on helper threads with their own
# connections), so their flush must be allowed to empty the append-only audit table.
audit_purge.install()


@pytest.fixture
def make_run(alice) -> Callable[..., AgentRun]:
    def make(agent: str = "incident_copilot") -> AgentRun:
        run_id = uuid.uuid4()
        return AgentRun.objects.create(
            id=run_id, thread_id=str(run_id), agent=agent, graph_version="1", requested_by=alice
        )

    return make
