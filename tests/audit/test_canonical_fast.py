"""canonical_text's orjson path writes exactly rfc8785's bytes, and takes only values on which
they provably agree: everything else (doubles, big integers, other types, characters outside
the Basic Multilingual Plane, surrogates, deep nesting) goes to rfc8785 as before."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from audit import canonical
from audit.canonical import CanonicalError, canonical_text
from core.json_limits import MAX_JSON_DEPTH, SAFE_INTEGER
from tests.audit.test_export_fast_lines import JSON

pytestmark = pytest.mark.skipif(canonical.orjson is None, reason="orjson is not installed")

# Every character class the escapes or the key order could split on.
TRICKY = (
    "".join(chr(i) for i in range(0x21))
    + '"\\/\x7f\x80\u00e9\u2028\u2029\ufeff\ufffd\uffff'
    + "plain text"
)
PLAIN = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-SAFE_INTEGER, max_value=SAFE_INTEGER),
        st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",)), max_size=8),
    ),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",))),
            inner,
            max_size=4,
        )
    ),
    max_leaves=16,
)


def _rfc8785(value) -> str:
    """canonical_text as it was before the orjson path."""
    return rfc8785.dumps(canonical._doubles(canonical.json_value(value))).decode("utf-8")


def test_a_sweep_event_record_takes_the_fast_path_with_rfc8785s_bytes():
    record = {
        "chain_version": 2,
        "seq": 9_007_199_254_740_991,
        "at": "2026-12-02T10:00:00.123456+00:00",
        "actor": "system:timeout",
        "actor_user_id": None,
        "actor_username": "",
        "action": "approval.expired",
        "run_id": str(uuid.uuid4()),
        "approval_id": 42,
        "tool": "refund_order",
        "data": {"default_decision": "reject", TRICKY: [TRICKY, True, False, None, -1, 0]},
        "ip": None,
        "user_agent": TRICKY,
    }
    assert canonical._plain_text(record) is not None
    assert canonical_text(record) == _rfc8785(record)
    # Keys that sort differently by code point and by UTF-8 bytes agree within the BMP.
    keys = {"\uff61": 1, "\u00e9": 2, "e": 3, "E": 4, "": 5, "\u2028": 6}
    assert canonical._plain_text(keys) == _rfc8785(keys)


@pytest.mark.parametrize(
    "value",
    [
        {"n": 1.5},
        {"n": 1.0},
        {"n": SAFE_INTEGER + 1},
        {"n": -SAFE_INTEGER - 1},
        {"\U0001f600": 1, "\uffff": 2},  # UTF-16 order differs from code point order
        {"s": "\U0001f600"},
        {"at": dt.datetime(2026, 12, 2, tzinfo=dt.UTC)},
        {"id": uuid.UUID(int=5)},
        {"d": decimal.Decimal("1.10")},
        {"t": (1, 2)},
        {1: "integer key"},
        {"s": "lone \ud800"},
    ],
)
def test_values_outside_the_fast_path_go_to_rfc8785_as_before(value):
    assert canonical._plain_text(value) is None
    try:
        expected = _rfc8785(value)
    except (rfc8785.CanonicalizationError, CanonicalError):
        with pytest.raises(CanonicalError):
            canonical_text(value)
    else:
        assert canonical_text(value) == expected


def test_nesting_beyond_the_depth_limit_goes_to_rfc8785():
    deep: list = []
    for _ in range(MAX_JSON_DEPTH + 1):
        deep = [deep]
    assert canonical._plain_text(deep) is None
    shallow: list = []
    for _ in range(MAX_JSON_DEPTH - 1):
        shallow = [shallow]
    assert canonical._plain_text(shallow) == _rfc8785(shallow)


@settings(max_examples=400, deadline=None)
@given(PLAIN)
def test_plain_values_are_written_as_rfc8785_writes_them(value):
    assert canonical._plain_text(value) in (None, _rfc8785(value))
    assert canonical_text(value) == _rfc8785(value)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_any_json_value_gets_rfc8785s_text_or_its_error(value):
    try:
        expected = _rfc8785(value)
    except (rfc8785.CanonicalizationError, CanonicalError):
        with pytest.raises(CanonicalError):
            canonical_text(value)
        return
    assert canonical_text(value) == expected
