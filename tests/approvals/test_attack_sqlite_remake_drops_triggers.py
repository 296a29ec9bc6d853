"""Attack (SQLite): any later migration that makes Django remake approvals_agentrun (AlterField,
most AddField/RemoveField: create new__, copy, DROP TABLE, RENAME) drops the triggers with the
old table, and from then on every status change would go uncounted, silently. ``migrate`` puts
them back (post_migrate) and counts the runs again."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection, models

from approvals.models import AgentRun
from approvals.rollup_runs import RUNS, run_status_triggers_ensure, runs_by_status_days
from tests.support.factories import RunFactory


def triggers() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [RUNS]
        )
        return {name for (name,) in cursor.fetchall()}


def _remake_runs_table() -> None:
    old = AgentRun._meta.get_field("flag")
    new = models.CharField(max_length=201, blank=True)
    new.set_attributes_from_name("flag")
    new.model = AgentRun
    with connection.schema_editor() as editor:
        editor.alter_field(AgentRun, old, new)
        editor.alter_field(AgentRun, new, old)


@pytest.mark.skipif("connection.vendor != 'sqlite'", reason="SQLite table remake")
def test_migrate_puts_back_the_triggers_a_table_remake_dropped(transactional_db):
    before = triggers()
    assert before  # installed by 0017
    _remake_runs_table()
    assert triggers() == set()  # what the remake does: the attack's premise
    run = RunFactory()  # created while nothing counts it
    call_command("migrate", verbosity=0)
    assert triggers() == before
    counted = runs_by_status_days(first=-(10**6), last=10**6)
    assert counted.get(run.status, 0) == AgentRun.objects.filter(status=run.status).count()


def test_the_check_does_nothing_when_the_triggers_are_there(transactional_db):
    assert run_status_triggers_ensure() is False


@pytest.mark.skipif("connection.vendor != 'sqlite'", reason="SQLite table remake")
def test_migrate_puts_back_the_pending_approval_triggers_a_table_remake_dropped(transactional_db):
    from approvals.models import ApprovalRequest
    from approvals.rollup_pending import APPROVALS, pending_cells
    from tests.support.factories import ApprovalFactory

    def approval_triggers() -> set[str]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s",
                [APPROVALS],
            )
            return {name for (name,) in cursor.fetchall()}

    before = approval_triggers()
    assert before  # installed by 0018
    old = ApprovalRequest._meta.get_field("spent_key")
    new = models.CharField(max_length=201, blank=True)
    new.set_attributes_from_name("spent_key")
    new.model = ApprovalRequest
    with connection.schema_editor() as editor:
        editor.alter_field(ApprovalRequest, old, new)
        editor.alter_field(ApprovalRequest, new, old)
    assert approval_triggers() == set()
    ApprovalFactory()  # pending, while nothing counts it
    call_command("migrate", verbosity=0)
    assert approval_triggers() == before
    assert (
        sum(cell[4] for cell in pending_cells())
        == ApprovalRequest.objects.filter(status="pending").count()
    )


def test_the_pending_check_does_nothing_when_the_triggers_are_there(transactional_db):
    from approvals.rollup_pending import pending_triggers_ensure

    assert pending_triggers_ensure() is False
