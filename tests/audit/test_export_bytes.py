"""The fast export writes exactly the bytes the export wrote before it (export_reference.py is
that code, frozen): every kind of value, version 1 rows, rows whose stored text is valid JSON
but not canonical, and batch boundaries."""

from __future__ import annotations

import pytest
from django.db import connection

from audit.exports import export_stream
from audit.manifests import export_start
from audit.models import AuditEvent, AuditExport
from audit.services import GENESIS_HASH, event_record, events_seed
from audit.verify import export_file_verify
from tests.audit.export_reference import reference_export
from tests.audit.test_canonical_form import REWRITTEN, _legacy_event
from tests.support.audit import triggers_disabled

pytestmark = pytest.mark.django_db

TRICKY = [
    {"input": REWRITTEN},
    {"k\U0001f600": "v", "k\ue000": "w", "é": "ü"},  # UTF-16 and code point orders differ
    {"note": 'quote " backslash \\ tab \t nul-free \x01 \x1f del \x7f sep \u2028 \u2029'},
    {"note": ',"ip":"1.2.3.4","run_id":"x"', "chain_version": 3, "hash": "forged"},
    {"amount": 12.5, "tiny": 1e-7, "e": 1e16, "n": -0, "big": 2**60, "safe": 2**53 - 1},
    {"formula": "=HYPERLINK(1)", "plus": "+1", "at": "@x", "list": [1, [2, {"z": None}]]},
    {"deep": {"deeper": {"deepest": [True, False, None, "", 0]}}},
    {},
]


def _events(bob) -> None:
    _legacy_event(seq=1, prev_hash=GENESIS_HASH, data={"amount": 12.5, "é": "ü"})
    for n, data in enumerate(TRICKY):
        event_record(
            action="approval.decided" if n % 2 else "run.created",
            actor=bob if n % 3 else f"agent:bot-{n}",
            approval_id=n if n % 2 else None,
            tool="=SUM(A1)" if n == 5 else "refund",
            data=data,
        )
    events_seed(count=7, action="seeded", tool="t")


def _body(user, *, format: str = "jsonl", filters=None, chunk_size: int = 3) -> tuple[bytes, bytes]:
    export = export_start(user=user, format=format, filters=filters or {})
    events = AuditEvent.objects.all()
    if filters:
        events = events.filter(**filters)
    reference = reference_export(export=export, events=events)
    body = b"".join(export_stream(export=export, events=events, chunk_size=chunk_size))
    return body, reference


@pytest.mark.parametrize("chunk_size", [1, 3, 2000])
def test_the_jsonl_export_writes_the_bytes_it_wrote_before(frank, bob, chunk_size):
    _events(bob)

    body, reference = _body(frank, chunk_size=chunk_size)

    assert body.startswith(reference)
    assert body[len(reference) :].count(b"\n") == 1  # then only the summary line
    result, _ = export_file_verify(body.splitlines(keepends=True))
    assert result.ok, result.reason
    assert result.count == 1 + len(TRICKY) + 7


def test_the_csv_export_writes_the_bytes_it_wrote_before(frank, bob):
    _events(bob)

    body, reference = _body(frank, format=AuditExport.Format.CSV)

    assert body == reference


def test_a_filtered_export_writes_the_bytes_it_wrote_before(frank, bob):
    _events(bob)

    body, reference = _body(frank, filters={"action": "approval.decided"})

    assert body.startswith(reference)
    assert reference.count(b"\n") == 1 + len(TRICKY) // 2


def test_a_stored_text_that_is_json_but_not_canonical_is_exported_as_before(frank, bob):
    _events(bob)
    with triggers_disabled(), connection.cursor() as cursor:
        # Spaces, an escaped letter, keys out of order: what a hand-edited row might hold.
        cursor.execute(
            "UPDATE audit_auditevent SET canonical = REPLACE(canonical, '\"action\":', "
            '\'"zz": 1, "action" : \') WHERE seq = 3'
        )
        cursor.execute(
            'UPDATE audit_auditevent SET canonical = REPLACE(canonical, \'"tool":"refund"\', '
            '\'"tool":"r\\u0065fund"\') WHERE seq = 4'
        )

    body, reference = _body(frank)

    assert b'"zz\\": 1' in reference and b"r\\\\u0065fund" in reference  # the edits are there
    assert body.startswith(reference)
