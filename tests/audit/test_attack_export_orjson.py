"""Attacks on the orjson export / verify paths (audit/fast_bytes.py)."""

from __future__ import annotations

import pytest
from django.db import connection

from audit.exports import export_stream
from audit.manifests import export_start
from audit.models import AuditEvent
from audit.services import GENESIS_HASH, event_record, events_seed
from audit.verify import chain_verify_db, export_file_verify
from tests.audit.export_reference import reference_export
from tests.audit.test_canonical_form import _legacy_event
from tests.audit.test_export_bytes import TRICKY
from tests.support.audit import triggers_disabled

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("flush_bytes", [1, 97, 500, 1024])
@pytest.mark.parametrize("chunk_size", [1, 4, 2000])
def test_flush_boundaries_neither_lose_nor_duplicate_a_line(frank, bob, flush_bytes, chunk_size):
    _legacy_event(seq=1, prev_hash=GENESIS_HASH, data={"amount": 12.5})
    for data in TRICKY:
        event_record(action="run.created", actor=bob, data=data)
    events_seed(count=9, action="seeded", tool="t")
    export = export_start(user=frank, format="jsonl", filters={})
    reference = reference_export(export=export, events=AuditEvent.objects.all())
    chunks = list(
        export_stream(
            export=export,
            events=AuditEvent.objects.all(),
            chunk_size=chunk_size,
            flush_bytes=flush_bytes,
        )
    )
    body = b"".join(chunks)

    assert body.startswith(reference)
    assert body[len(reference) :].count(b"\n") == 1
    result, _ = export_file_verify(body.splitlines(keepends=True))
    assert result.ok, result.reason
    export.refresh_from_db()
    assert export.row_count == 1 + len(TRICKY) + 9


@pytest.mark.skipif(connection.vendor != "sqlite", reason="a BLOB in a TEXT column: SQLite only")
def test_a_version_1_rows_unhashed_canonical_column_does_not_crash_verify(bob):
    """A version 1 row's hash does not cover `canonical`; the old walk never read it for such a
    row. The new walk encodes it before looking at chain_version: a BLOB there is a 500."""
    _legacy_event(seq=1, prev_hash=GENESIS_HASH, data={"amount": 12.5})
    event_record(action="run.created", actor=bob, data={"x": 1})
    assert chain_verify_db().ok
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditevent SET canonical = X'7B7D' WHERE seq = 1")

    result = chain_verify_db()  # AttributeError: 'bytes' object has no attribute 'encode'

    assert result.ok, result.reason


def _tamper(sql: str, params: list) -> None:
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute(sql, params)


@pytest.mark.parametrize(
    "data",
    [
        '{"x": true, "s": "a"}',
        '{"x": "1", "s": "a"}',
        '{"x": 18446744073709551617, "s": "a"}',
        '{"x": 9007199254740993, "s": "a"}',
        '{"x": 1, "s": "a", "t": null}',
        '{"x": 1, "s": "\\u00e9"}',
        '{"x": 1}',
    ],
)
def test_a_data_column_edit_is_reported(bob, data):
    event_record(action="run.created", actor=bob, data={"x": 1, "s": "a"})
    event_record(action="run.created", actor=bob, data={"y": 2})
    _tamper("UPDATE audit_auditevent SET data = %s WHERE seq = 1", [data])

    result = chain_verify_db()

    assert not result.ok and result.broken_seq == 1, result.as_dict()


def test_a_deleted_middle_row_and_a_rehashed_text_are_reported(bob):
    for n in range(4):
        event_record(action="run.created", actor=bob, data={"n": n})
    _tamper("DELETE FROM audit_auditevent WHERE seq = 2", [])
    assert chain_verify_db().broken_seq == 2


def test_an_ip_column_edit_is_reported(bob):
    event_record(action="run.created", actor=bob, data={"n": 1})
    event_record(action="run.created", actor=bob, data={"n": 2})
    _tamper("UPDATE audit_auditevent SET ip = %s WHERE seq = 1", ["10.0.0.2"])
    result = chain_verify_db()
    assert not result.ok and result.broken_seq == 1, result.as_dict()
