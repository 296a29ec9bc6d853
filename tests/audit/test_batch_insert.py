"""events_record's INSERT on Postgres: the rows travel as one JSON text (not one array per
column, which psycopg escapes element by element in Python), and what is stored is exactly
what was hashed: the canonical text, the parsed data, the timestamp, the ids."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection, transaction

from audit.batch import events_record
from audit.canonical import canonical_parse
from audit.models import AuditEvent
from audit.services import event_record, event_row, record_text
from audit.verify import chain_verify_db

pytestmark = pytest.mark.django_db

# Values whose text a careless encoding would change: quotes, backslashes, braces and commas
# (array syntax), non-ASCII, line separators, HTML, large and fractional numbers, nesting.
TRICKY = {
    "quote": "a \"b\" \\ c {d,e} 'f'",
    "unicode": "é 漢 \u2028 \u2029 😀 <b>&amp;</b>",
    "numbers": [0, -1, 2**53, 1.5, 1e-7, 123456789.125],
    "nested": {"z": [None, True, False, {}], "a": {"b": ["", " "]}},
    "newline": "one\ntwo\r\nthree\ttab",
}


def _events(count: int) -> list[dict]:
    run_id = uuid.uuid4()
    return [
        {
            "action": "approval.reminded",
            "actor": "system:sweep",
            "run_id": run_id,
            "approval_id": n + 1,
            "tool": 'refund_"order"',
            "data": {"n": n, **TRICKY},
        }
        for n in range(count)
    ]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the Postgres INSERT")
def test_the_batch_insert_binds_one_parameter_not_one_array_per_column():
    inserts: list[tuple[str, object]] = []

    def capture(execute, sql, params, many, context):
        if sql.lstrip().upper().startswith('INSERT INTO "AUDIT_AUDITEVENT"'):
            inserts.append((sql, params))
        return execute(sql, params, many, context)

    with transaction.atomic(), connection.execute_wrapper(capture):
        events_record(_events(30))
    assert len(inserts) == 1
    assert len(inserts[0][1]) == 1


def test_stored_rows_are_the_hashed_rows_with_their_ids():
    event_record(action="run.created", actor="system:test")
    with transaction.atomic():
        rows = events_record(_events(25))
    stored = {row.pk: row for row in AuditEvent.objects.filter(seq__gt=1)}
    assert sorted(stored) == sorted(row.pk for row in rows)
    for row in rows:
        back = stored[row.pk]
        assert (back.seq, back.at, back.hash, back.prev_hash) == (
            row.seq,
            row.at,
            row.hash,
            row.prev_hash,
        )
        assert back.canonical == row.canonical == record_text(event_row(back))
        assert back.data == row.data == canonical_parse(back.canonical)["data"]
        assert (back.run_id, back.approval_id, back.tool, back.ip, back.user_agent) == (
            row.run_id,
            row.approval_id,
            'refund_"order"',
            None,
            "",
        )
        assert not row._state.adding
    result = chain_verify_db()
    assert result.ok and result.count == 26
