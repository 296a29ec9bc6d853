"""Canonical JSON: the byte forms that hashes are computed over.

- ``canonical_text`` (RFC 8785, JCS): what chain version 2 events and approval payload hashes
  cover. It refuses what JCS cannot represent with one error, ``CanonicalError``.
- ``canonical_json`` (sorted keys, Python's number spelling): chain version 1 events, the
  layout of export lines and their digest, and internal fingerprints (effects, idempotency keys)
  whose stored values must keep matching.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import re
import uuid
from typing import Any

import rfc8785

from core.errors import ApplicationError
from core.json_limits import MAX_JSON_DEPTH, SAFE_INTEGER, json_problem

try:
    import orjson
except ImportError:  # pragma: no cover - installed with langgraph-checkpoint-postgres
    orjson = None

# RFC 8785 numbers are IEEE-754 doubles: integers beyond this lose digits, so JCS refuses them.


class CanonicalError(ApplicationError):
    """A value with no RFC 8785 form: NaN, an infinity, a lone surrogate, or nesting too deep.
    ``errors`` names the path of the first such value."""


def _default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace, UTF-8 kept as is."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_default
    )


def json_value(value: Any) -> Any:
    """Plain JSON types (dates, UUIDs and decimals as text, keys as strings), numbers as is."""
    try:
        return json.loads(json.dumps(value, default=_default, ensure_ascii=False))
    except RecursionError:
        raise CanonicalError(
            "The JSON is nested too deeply.", errors={"": "nested too deeply"}
        ) from None


def canonical_text(value: Any) -> str:
    """The RFC 8785 (JCS) text of a JSON value; CanonicalError when it has none.

    Integers beyond 2**53 - 1 are written as the doubles JSON readers take them for: the API
    refuses them (json_problem), but Postgres jsonb gives an agent's 1e21 back as
    1000000000000000000000, and recording or hashing that value again must neither fail nor
    change its text."""
    fast = _plain_text(value)
    if fast is not None:
        return fast
    plain = _doubles(json_value(value))
    try:
        return rfc8785.dumps(plain).decode("utf-8")
    except (rfc8785.CanonicalizationError, RecursionError):
        problem = json_problem(plain, exact=True)
        path, reason = (problem.path, problem.message) if problem else ("", "not RFC 8785")
        raise CanonicalError(
            f"{path or 'value'}: {reason}.", errors={path or "data": reason}
        ) from None


# Outside the Basic Multilingual Plane, UTF-16 order (RFC 8785's key order) is not code point
# order (orjson's and Python's).
_NOT_BMP = re.compile("[\ud800-\udfff\U00010000-\U0010ffff]")


def _plain_text(value: Any) -> str | None:
    """canonical_text(value) written by orjson (in C; rfc8785 is pure Python, most of an audit
    append's time), or None to take rfc8785's path. Only for the values on which the three
    writers provably agree: exactly dict (str keys), list, str, bool, None and integers within
    2**53 - 1, nested at most MAX_JSON_DEPTH deep; no double (their spellings differ), no
    other type (json_value's conversions), no character outside the Basic Multilingual Plane
    (key order). For these json_value and _doubles change nothing, and orjson writes what
    canonical_json writes (audit/fast_bytes.py), which is RFC 8785's text (audit/fast_json.py):
    the same escapes, separators, key order and integers. tests/audit/test_canonical_fast.py
    compares the bytes with rfc8785's."""
    if orjson is None or not _plain(value, 0):
        return None
    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode("utf-8")
    except TypeError:  # orjson's encode error: a lone surrogate, which rfc8785 refuses too
        return None
    return text if text.isascii() or not _NOT_BMP.search(text) else None


def _plain(value: Any, depth: int) -> bool:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return -SAFE_INTEGER <= value <= SAFE_INTEGER
    if depth >= MAX_JSON_DEPTH:
        return False
    if kind is dict:
        return all(type(key) is str and _plain(item, depth + 1) for key, item in value.items())
    if kind is list:
        return all(_plain(item, depth + 1) for item in value)
    return False


def _doubles(value: Any, path: str = "") -> Any:
    """Integers beyond 2**53 - 1 as the doubles they equal; one that no double equals (a 19-digit
    order id) is refused, never recorded as its neighbour."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > SAFE_INTEGER:
        try:
            double = float(value)
        except OverflowError:  # beyond any double: rfc8785 refuses it, named by json_problem
            return value
        if double != value:
            raise CanonicalError(
                f"{path or 'The value'} is the integer {value}, which no IEEE-754 double equals: "
                "the audit cannot record it exactly (send it as a string).",
                errors={path: f"integers must be within +-{SAFE_INTEGER} or exact doubles"},
            )
        return double
    if isinstance(value, dict):
        return {
            key: _doubles(item, f"{path}.{key}" if path else str(key))
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_doubles(item, f"{path}.{i}" if path else str(i)) for i, item in enumerate(value)]
    return value


def canonical_parse(text: str) -> Any:
    """Read an RFC 8785 text back: its numbers are doubles, and it writes integral ones below
    1e21 without exponent (1e16 as 10000000000000000), so integers beyond 2**53 - 1 read as the
    doubles they are."""
    return json.loads(text, parse_int=_int_or_double)


def _int_or_double(digits: str) -> int | float:
    number = int(digits)
    return number if abs(number) <= SAFE_INTEGER else float(number)


def canonical_hash(value: Any) -> str:
    """sha256 of the RFC 8785 text: the payload hash reviewers see and decisions echo."""
    return sha256_hex(canonical_text(value))


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def payload_hash(payload: Any) -> str:
    """sha256 of canonical_json: internal fingerprints compared with stored ones (effects,
    idempotency keys, sandbox requests). Approval payloads use canonical_hash."""
    return sha256_hex(canonical_json(payload))


def json_has_nul(value: Any) -> bool:
    """True when a string or key anywhere in the value holds U+0000 (Postgres jsonb refuses it)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(json_has_nul(k) or json_has_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(json_has_nul(v) for v in value)
    return False
