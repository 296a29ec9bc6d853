"""Attack (SQLite): the pending-approval delta stores only the run id there, and the agent is
looked up when the delta is folded or read. An approval deleted while pending and then its run
(the run is PROTECTed by its approvals, so that is the only order a delete can take), before the
next compaction: the -1 finds no run and lands in agent "" while the +1 it cancels was folded
under the run's agent. The agent grouping then shows a pending approval that no longer exists
and a -1 under agent ""."""

from __future__ import annotations

from collections import Counter

import pytest
from django.db import connection

from approvals.models import AgentRun, ApprovalRequest
from approvals.rollup_pending import pending_cells, pending_compact
from tests.support.factories import ApprovalFactory, RunFactory


def by_agent() -> Counter:
    found: Counter = Counter()
    for _day, _tier, _tool, agent, n, escalated, reminded in pending_cells():
        found[agent, "n"] += n
        found[agent, "escalated"] += escalated
        found[agent, "reminded"] += reminded
    return +found


def live_by_agent() -> Counter:
    found: Counter = Counter()
    for approval in ApprovalRequest.objects.filter(status="pending").select_related("run"):
        found[approval.run.agent, "n"] += 1
        found[approval.run.agent, "escalated"] += approval.escalated_at is not None
        found[approval.run.agent, "reminded"] += approval.reminded_at is not None
    return +found


@pytest.mark.django_db
@pytest.mark.parametrize("compact_between", [False, True])
def test_deleting_a_pending_approval_and_then_its_run_leaves_no_count_behind(
    alice, compact_between
):
    from approvals.rollup_rebuild import rollups_rebuild

    rollups_rebuild(progress=lambda line: None)  # start from the table (see test_rollups_pending)
    kept_run = RunFactory(requested_by=alice, agent="ops_agent")
    ApprovalFactory(run=kept_run)
    run = RunFactory(requested_by=alice, agent="refund_agent")
    ApprovalFactory(run=run, escalated_at=run.created_at)
    pending_compact()  # the +1 is folded under refund_agent
    assert by_agent() == live_by_agent()

    ApprovalRequest.objects.filter(run=run).delete()
    if compact_between:
        pending_compact()
    AgentRun.objects.filter(pk=run.pk).delete()  # the -1 has not found its agent yet

    assert by_agent() == live_by_agent()
    pending_compact()
    assert by_agent() == live_by_agent()


@pytest.mark.skipif("connection.vendor != 'sqlite'", reason="SQLite table remake")
def test_a_remake_of_the_runs_table_works_and_migrate_puts_the_run_trigger_back(transactional_db):
    from django.core.management import call_command
    from django.db import models

    from approvals.rollup_pending import _RUN_DELETE, RUNS

    def run_triggers() -> set[str]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [RUNS]
            )
            return {name for (name,) in cursor.fetchall()}

    assert _RUN_DELETE in run_triggers()
    old = AgentRun._meta.get_field("flag")
    new = models.CharField(max_length=201, blank=True)
    new.set_attributes_from_name("flag")
    new.model = AgentRun
    with connection.schema_editor() as editor:  # the remake: the trigger goes with the table
        editor.alter_field(AgentRun, old, new)
        editor.alter_field(AgentRun, new, old)
    assert _RUN_DELETE not in run_triggers()
    call_command("migrate", verbosity=0)
    assert _RUN_DELETE in run_triggers()
