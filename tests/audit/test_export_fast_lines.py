"""audit/fast_bytes.event_line (orjson) writes exactly the line the standard-library export
writes, or leaves the row to it: for generated JSON of every kind, spelled as RFC 8785,
canonical_json and with whitespace. And it is the path ordinary rows take."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit import fast_bytes
from audit.canonical import CanonicalError, canonical_json, canonical_parse
from audit.services import CHAIN_VERSION, record_text

pytestmark = pytest.mark.skipif(not fast_bytes.AVAILABLE, reason="orjson is not installed")

PREV, HASH = "a" * 64, "b" * 64
# Keys and strings from every plane, control characters, quotes and backslashes.
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
NUMBER = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from([2**53 - 1, 2**53, -(2**53), 0, -1]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e-7, 1e16, 12.5, 1.0, -0.0, 1e21, 5e-324]),
)
JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBER, TEXT),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


def _record(data, **fields) -> dict:
    return {
        "seq": 7,
        "at": "2026-12-01T10:00:00.123456+00:00",
        "actor": "user:3",
        "actor_user_id": 3,
        "actor_username": "bob",
        "action": "approval.decided",
        "run_id": "00000064-0000-4000-8000-000000000064",
        "approval_id": 5,
        "tool": "refund",
        "data": data,
        "ip": "10.0.0.1",
        "user_agent": "Mozilla/5.0",
        **fields,
    }


def _reference_line(text: str) -> bytes:
    """The line as the frozen export (tests/audit/export_reference.py) writes a v2 row."""
    row = canonical_parse(text)
    row["canonical"] = text
    row["prev_hash"], row["hash"] = PREV, HASH
    row["record"] = "event"
    return (canonical_json(row) + "\n").encode()


def _spellings(record: dict) -> list[str]:
    texts = [canonical_json({"chain_version": CHAIN_VERSION, **record})]
    with contextlib.suppress(CanonicalError):  # an integer no double equals has no JCS form
        texts.append(record_text(record))  # RFC 8785: doubles as JCS writes them
    texts.append(json.dumps({"chain_version": CHAIN_VERSION, **record}, ensure_ascii=False))
    return texts


def _check(text: str) -> bool:
    """Assert the fast line is the reference line; True when the fast path took the row."""
    fast = fast_bytes.event_line(text, PREV, HASH)
    if fast is None:
        return False
    line, seq = fast
    assert line == _reference_line(text), text
    assert seq == canonical_parse(text)["seq"]
    return True


@settings(max_examples=400, deadline=None)
@given(data=JSON, tool=st.one_of(st.none(), TEXT), extra=st.dictionaries(TEXT, JSON, max_size=2))
def test_a_fast_line_is_the_line_the_standard_library_writes(data, tool, extra):
    record = {**extra, **_record(data, tool=tool)}
    for text in _spellings(record):
        _check(text)


@settings(max_examples=200, deadline=None)
@given(data=st.dictionaries(TEXT, st.one_of(st.none(), st.booleans(), TEXT, st.integers(-5, 5))))
def test_records_without_doubles_take_the_fast_path(data):
    text = canonical_json({"chain_version": CHAIN_VERSION, **_record(data)})

    assert _check(text)


@pytest.mark.parametrize(
    "data",
    [
        {"x": 12.5},  # doubles: Python and orjson spell some of them differently
        {"x": [1e-7]},
        {"x": {"y": 1e16}},
        {"big": 2**53},  # read back as a double by canonical_parse
        {"big": -(2**60)},
        {"k\U0001f600": 1, "k\ue000": 2},  # RFC 8785's key order, not canonical_json's
    ],
)
def test_texts_orjson_would_spell_otherwise_are_left_to_the_standard_library(data):
    text = record_text(_record(data))

    assert fast_bytes.event_line(text, PREV, HASH) is None


@pytest.mark.parametrize(
    "text",
    [
        '{"a":1, "seq":1}',  # whitespace
        '{"seq":1,"a":1}',  # keys out of order
        '{"a":"r\\u0065fund","seq":1}',  # an escape canonical_json does not write
        '{"a":1,"a":2,"seq":1}',  # a repeated key
        '{"seq":-0}',
        '[{"seq":1}]',  # not an object
        '{"a":1}',  # no seq
        "",
        "not json",
        '{"seq":1,"s":"\\ud800"}',  # a lone surrogate
    ],
)
def test_texts_that_are_not_orjsons_own_writing_are_left_to_the_standard_library(text):
    assert fast_bytes.event_line(text, PREV, HASH) is None


@pytest.mark.parametrize(
    "text",
    [
        '{"n":",1.5","seq":1}',  # false alarms inside strings: the slow path, still right
        '{"n":"\\":2.5","seq":1}',
        '{"n":"[1e5]","seq":1}',
    ],
)
def test_a_string_that_looks_like_a_double_only_costs_the_fast_path(text):
    assert not fast_bytes.no_double(text.encode())
    assert fast_bytes.event_line(text, PREV, HASH) is None
    assert fast_bytes.no_double(b'{"at":"10:30:00.5","ip":"10.0.0.1","n":[1,2],"seq":-3}')
