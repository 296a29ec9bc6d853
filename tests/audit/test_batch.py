"""events_record: a list of events appended with one chain lock and one INSERT, chained and
hashed exactly as event_record chains and hashes them one by one."""

from __future__ import annotations

import uuid

import pytest
from django.db import transaction

from audit.batch import events_record
from audit.models import AuditEvent
from audit.services import event_record, event_row, record_hash, record_text
from audit.verify import chain_verify_db

pytestmark = pytest.mark.django_db


def _events(count: int, *, actor=None) -> list[dict]:
    run_id = uuid.uuid4()
    return [
        {
            "action": "approval.reminded",
            "actor": actor or "system:sweep",
            "run_id": run_id,
            "approval_id": n + 1,
            "tool": "refund_order",
            "data": {"n": n, "amount": 1.5, "text": "é \u2028 <b>"},
        }
        for n in range(count)
    ]


def test_a_batch_is_one_lock_and_head_read_and_one_insert(django_assert_max_num_queries):
    event_record(action="run.created", actor="system:test")
    with transaction.atomic(), django_assert_max_num_queries(2):
        rows = events_record(_events(40))
    assert [row.seq for row in rows] == list(range(2, 42))
    assert AuditEvent.objects.count() == 41


def test_batched_events_chain_and_hash_like_single_ones(alice):
    with transaction.atomic():
        event_record(action="run.created", actor=alice)
        events_record(_events(3, actor=alice))
        event_record(action="run.completed", actor="system:test")  # after the batch: its head
    events_record(_events(2))  # outside a transaction: its own
    rows = list(AuditEvent.objects.order_by("seq"))
    assert [row.seq for row in rows] == [1, 2, 3, 4, 5, 6, 7]
    for prev, row in zip(rows, rows[1:], strict=False):
        assert row.prev_hash == prev.hash
        assert row.canonical == record_text(event_row(row))
        assert row.hash == record_hash(row.prev_hash, row.canonical)
    assert (rows[1].actor, rows[1].actor_user_id, rows[1].actor_username) == (
        f"user:{alice.pk}",
        alice.pk,
        alice.username,
    )
    result = chain_verify_db()
    assert result.ok and result.count == 7


def test_a_batch_rolled_back_leaves_the_head_where_it_was():
    event_record(action="run.created", actor="system:test")
    with pytest.raises(RuntimeError), transaction.atomic():
        events_record(_events(3))
        raise RuntimeError
    event_record(action="run.completed", actor="system:test")
    assert list(AuditEvent.objects.values_list("seq", flat=True)) == [1, 2]
    assert chain_verify_db().ok


def test_an_event_with_an_unknown_key_is_refused():
    with pytest.raises(TypeError):
        events_record([{"action": "x", "actor": "system:test", "request": object()}])
    assert not AuditEvent.objects.exists()
