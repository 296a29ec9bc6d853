"""The runner's writes of a run's personal data are sealed (core/sealing.py), and the runner
reads them back opened: the graph gets its input, the resume its decision."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from agents.runtime import advance
from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from agents.services import run_start
from approvals.changes import approval_changes, changes_digest
from approvals.models import AgentRun, ApprovalRequest
from approvals.services import approval_decide
from core.sealing import MARKER
from tests.approvals.test_sealed_writes import assert_sealed, raw
from tests.support.agents import build_note_graph
from tests.support.factories import RunFactory

pytestmark = pytest.mark.django_db

TOPIC = "grace.hopper@example.com"


def test_a_run_through_an_approval_keeps_every_column_sealed(note_agent, alice, bob):
    run = run_start(agent="note_agent", input={"topic": TOPIC}, user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    approval = ApprovalRequest.objects.get(run=run)
    assert TOPIC in approval.payload["blast_radius"]  # the reviewer reads it opened
    approval_decide(
        approval=approval, user=bob, decision="approve", seen_hash=approval.payload_hash
    )
    assert advance.run_advance(run_id=run.id) == "completed"
    for column in ("input", "output"):
        stored = raw(AgentRun, column, run.pk)
        assert MARKER in stored and "grace.hopper" not in stored
    for column in ("args", "payload", "decision"):
        stored = raw(ApprovalRequest, column, approval.pk)
        assert MARKER in stored and "grace.hopper" not in stored
    finished = AgentRun.objects.get(pk=run.pk)
    assert finished.input == {"topic": TOPIC}
    assert TOPIC in json.dumps(finished.output)  # the final state names the topic


def test_a_state_migration_is_kept_sealed_until_the_resume_applies_it(note_agent, alice, bob):
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
    advance.run_advance(run_id=run.id)

    def migrate(values: dict, from_version: str) -> dict:
        return {"log": [f"moved for {TOPIC}"]}

    agent_register(
        AgentSpec(
            name="note_agent",
            version="2",
            factory=build_note_graph,
            policy="migrate",
            migrate=migrate,
        )
    )
    try:
        agent_unregister("note_agent", "1")
        assert advance.run_advance(run_id=run.id) == "waiting"
        assert_sealed_as(run, TOPIC)
        assert AgentRun.objects.get(pk=run.pk).pending_migration == {"log": [f"moved for {TOPIC}"]}
        approval = ApprovalRequest.objects.get(run=run)
        approval_decide(
            approval=approval,
            user=bob,
            decision="approve",
            seen_hash=approval.payload_hash,
            changes_seen=changes_digest(approval_changes(approval)),  # the new version
        )
        assert advance.run_advance(run_id=run.id) == "completed"
        assert f"moved for {TOPIC}" in AgentRun.objects.get(pk=run.pk).output["log"]
    finally:
        agent_unregister("note_agent", "2")


def assert_sealed_as(run: AgentRun, text: str) -> None:
    stored = raw(AgentRun, "pending_migration", run.pk)
    assert MARKER in stored and text not in stored


def test_the_check_finds_plaintext_where_a_row_holds_it(alice):
    """Control: a run stored in plaintext (written before sealing) fails the check, and reads
    as it is."""
    run = RunFactory(requested_by=alice)
    table = connection.ops.quote_name(AgentRun._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET input = %s WHERE id = %s",  # noqa: S608
            [
                '{"email": "ada.lovelace@example.com"}',
                AgentRun._meta.pk.get_db_prep_value(run.pk, connection),
            ],
        )
    with pytest.raises(AssertionError):
        assert_sealed(AgentRun, "input", run.pk)
    assert AgentRun.objects.get(pk=run.pk).input == {"email": "ada.lovelace@example.com"}
