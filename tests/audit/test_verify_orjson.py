"""chain_verify_db's orjson check (audit/fast_bytes.columns_are_text) accepts no row that the
standard-library check (audit/fast_json.columns_are_text) refuses, takes the rows event_record
writes, and the walk still names every tampering (tests/audit/test_verify_fast.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit import fast_bytes
from audit.canonical import CanonicalError
from audit.fast_json import columns_are_text, plain_scanner
from audit.models import AuditEvent
from audit.services import CHAIN_VERSION, event_record, events_seed, record_text
from audit.verify import _WALK_FIELDS, _walk_columns, chain_verify_db
from tests.audit.test_export_fast_lines import JSON, TEXT

pytestmark = pytest.mark.skipif(not fast_bytes.AVAILABLE, reason="orjson is not installed")

AT = "2026-12-01T10:00:00.123456+00:00"
RUN = "00000064-0000-4000-8000-000000000064"


def _row(data, *, text_data=None, ip="10.0.0.1", seq=7, user_id=3, at=AT) -> tuple:
    """A _WALK_FIELDS tuple as Postgres gives it (data as jsonb prints it, with spaces)."""
    data_text = json.dumps(data if text_data is None else text_data, ensure_ascii=False)
    return (
        *(seq, CHAIN_VERSION, "", "p", "h", at, "user:3", user_id, "bob", "run.created", RUN, 5),
        *("refund", data_text, ip, "agent/1"),
    )


def _text(data, **fields) -> str:
    record = {
        "seq": 7, "at": AT, "actor": "user:3", "actor_user_id": 3, "actor_username": "bob",
        "action": "run.created", "run_id": RUN, "approval_id": 5, "tool": "refund",
        "data": data, "ip": "10.0.0.1", "user_agent": "agent/1", **fields,
    }  # fmt: skip
    return record_text(record)


def _both(row: tuple, text: str) -> tuple[bool, bool]:
    row = (*row[:2], text, *row[3:])
    scan, doubles = plain_scanner()
    return fast_bytes.columns_are_text(row, text.encode(), {}), columns_are_text(
        row, text, scan, doubles
    )


@settings(max_examples=300, deadline=None)
@given(data=st.dictionaries(TEXT, JSON, max_size=4), other=st.dictionaries(TEXT, JSON, max_size=2))
def test_the_orjson_check_accepts_only_what_the_standard_library_check_accepts(data, other):
    try:
        text = _text(data)
    except CanonicalError:
        return
    for row in (_row(data), _row(data, text_data=other), _row(data, ip="10.0.0.2")):
        fast, slow = _both(row, text)
        assert fast == slow, (row, text)


@pytest.mark.parametrize(
    ("data", "row_kwargs", "text_fields"),
    [
        ({"x": 1}, {}, {}),
        ({"é": ["ü", None, True, -5]}, {}, {}),
        ({"x": 12.5}, {}, {}),  # a double: left to record_problem
        ({"x": 1}, {"text_data": {"x": True}}, {}),
        ({"x": 1}, {"text_data": {"x": 1.0}}, {}),
        ({"x": 1}, {"seq": 8}, {}),
        ({"x": 1}, {"user_id": 2**53}, {"actor_user_id": 2**53}),  # beyond 2**53 - 1
        ({"x": 1}, {"ip": "10.0.0.01"}, {}),
        ({"x": 1}, {"at": "2026-12-01T10:00:00.000000+00:00"}, {"at": "2026-12-01T10:00:00+00:00"}),
        ({"k\U0001f600": 1, "k\ue000": 2}, {}, {}),  # UTF-16 key order
    ],
)
def test_the_orjson_check_agrees_with_the_standard_library_check(data, row_kwargs, text_fields):
    fast, slow = _both(_row(data, **row_kwargs), _text(data, **text_fields))

    assert fast == slow


@pytest.mark.django_db
def test_the_orjson_check_takes_the_rows_event_record_writes(bob):
    events_seed(count=20)
    event_record(action="run.created", actor=bob, approval_id=5, data={"é": ["ü", 1, None]})
    walk = AuditEvent.objects.order_by("seq").annotate(**_walk_columns())
    rows = list(walk.values_list(*_WALK_FIELDS))

    assert len(rows) == 21
    assert all(fast_bytes.columns_are_text(row, row[2].encode(), {}) for row in rows)
    assert chain_verify_db().ok
