"""The hash chain: what event_record writes, and what verify finds."""

from __future__ import annotations

import uuid

import pytest
import rfc8785
from django.db import connection
from django.test import RequestFactory

from audit.canonical import sha256_hex
from audit.models import AuditEvent
from audit.services import GENESIS_HASH, event_record, event_row, events_seed, record_text
from audit.verify import chain_verify_db
from tests.support.audit import triggers_disabled

pytestmark = pytest.mark.django_db


def test_each_event_hashes_its_row_onto_the_previous_hash(bob):
    first = event_record(action="run.created", actor=bob, data={"agent": "triage"})
    second = event_record(action="approval.requested", actor="agent:42", approval_id=7)

    assert (first.seq, second.seq) == (1, 2)
    assert first.prev_hash == GENESIS_HASH
    assert second.prev_hash == first.hash
    stored = AuditEvent.objects.get(seq=2)
    assert stored.chain_version == 2
    assert stored.canonical == rfc8785.dumps({"chain_version": 2, **event_row(stored)}).decode()
    assert stored.hash == sha256_hex(first.hash + stored.canonical)


def test_a_user_actor_keeps_id_and_username_snapshot(bob):
    event = event_record(action="approval.decided", actor=bob)

    assert (event.actor, event.actor_user_id, event.actor_username) == (
        f"user:{bob.pk}",
        bob.pk,
        "bob",
    )


def test_request_context_is_recorded_and_hash_survives_the_database_round_trip(bob):
    request = RequestFactory().get("/", REMOTE_ADDR="2001:DB8::0:1", HTTP_USER_AGENT="pytest/1")
    run_id = uuid.uuid4()
    event_record(
        action="run.created",
        actor=bob,
        run_id=str(run_id).upper(),
        approval_id="12",
        data={"amount": 12.5, "when": "2026-01-01", "nested": {"b": [1, 2], "a": None}},
        request=request,
    )

    stored = AuditEvent.objects.get()
    assert stored.ip == "2001:db8::1"
    assert stored.user_agent == "pytest/1"
    assert stored.run_id == run_id
    assert stored.approval_id == 12
    assert chain_verify_db().ok


def test_verify_reports_an_intact_chain_with_its_head():
    head_seq = events_seed(count=25)

    result = chain_verify_db()

    assert result.ok
    assert (result.count, result.last_seq) == (25, head_seq)
    assert result.head_hash == AuditEvent.objects.get(seq=25).hash


def test_a_row_edited_with_triggers_disabled_is_reported_at_its_seq():
    events_seed(count=30)
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditevent SET action = 'policy.changed' WHERE seq = 17")

    result = chain_verify_db()

    assert not result.ok
    assert result.broken_seq == 17
    assert result.count == 16


def test_a_rehashed_edit_still_breaks_the_next_link():
    events_seed(count=10)
    edited = AuditEvent.objects.get(seq=4)
    edited.actor = "system:someone-else"
    text = record_text(event_row(edited))
    forged = sha256_hex(edited.prev_hash + text)
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE audit_auditevent SET actor = %s, canonical = %s, hash = %s WHERE seq = 4",
            [edited.actor, text, forged],
        )

    result = chain_verify_db()

    assert (result.ok, result.broken_seq) == (False, 5)


def test_a_row_deleted_with_triggers_disabled_is_reported_as_missing():
    events_seed(count=10)
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM audit_auditevent WHERE seq = 6")

    result = chain_verify_db()

    assert (result.ok, result.broken_seq) == (False, 6)
    assert "missing" in result.reason


def test_seeding_continues_the_chain_of_recorded_events(bob):
    event_record(action="run.created", actor=bob)
    events_seed(count=5)
    event_record(action="run.completed", actor="agent:1")

    result = chain_verify_db()

    assert (result.ok, result.count) == (True, 7)
