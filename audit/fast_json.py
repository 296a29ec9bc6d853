"""Canonical texts read and written fast, for the export and the verifier's walk.

``canonical_parse`` / ``canonical_json`` (audit/canonical.py) build a decoder or encoder per
call and rfc8785 is pure Python; these build theirs once. ``text_plain`` and
``columns_are_text`` show a stored text to be RFC 8785's form without rfc8785 in the cases
where canonical_json writes what RFC 8785 writes (audit/verify.py's fast path).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from json.encoder import c_encode_basestring, c_make_encoder
from typing import Any

from audit.canonical import _int_or_double, canonical_parse
from audit.services import CHAIN_VERSION, _ip_text
from core.json_limits import SAFE_INTEGER

# canonical_json of plain JSON values (what json.loads gives: no default= needed), built once:
# JSONEncoder.encode would build the C encoder again for every call.
_ENCODER = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, check_circular=False
)
_C_ENCODE = (
    c_make_encoder(None, _ENCODER.default, c_encode_basestring, None, ":", ",", True, False, True)
    if c_make_encoder is not None and c_encode_basestring is not None
    else None
)
# canonical_parse without building a decoder per call (json.loads does, given parse_int).
_SCAN = json.JSONDecoder(parse_int=_int_or_double).scan_once
# Outside the Basic Multilingual Plane, UTF-16 order (RFC 8785's key order) is not code point
# order (Python's); surrogates are refused by RFC 8785.
NOT_BMP = re.compile("[\ud800-\udfff\U00010000-\U0010ffff]")


def text_parse(text: str) -> Any:
    """canonical_parse(text), faster: the C scanner, prebuilt. Texts it does not read whole
    (surrounding whitespace, or not JSON) go to canonical_parse, which reads or refuses them."""
    try:
        value, end = _SCAN(text, 0)
    except (StopIteration, ValueError, TypeError, RecursionError):
        return canonical_parse(text)  # which refuses it as it always did
    return value if end == len(text) else canonical_parse(text)


def json_plain(value: Any) -> str:
    """canonical_json(value) for plain JSON values (dict, list, str, int, float, bool, None)."""
    if _C_ENCODE is None:
        return _ENCODER.encode(value)
    return "".join(_C_ENCODE(value, 0))


def plain_scanner() -> tuple[Any, list[bool]]:
    """canonical_parse's scanner that also notes any number it reads as a double (a fraction,
    an exponent, NaN or an infinity, an integer beyond 2**53 - 1): a fresh one per walk, so
    threads share none."""
    doubles: list[bool] = []

    def double(text: str) -> float:
        doubles.append(True)
        return float(text)

    def integer(digits: str) -> int | float:
        number = _int_or_double(digits)
        if type(number) is float:
            doubles.append(True)
        return number

    decoder = json.JSONDecoder(parse_int=integer, parse_float=double, parse_constant=double)
    return decoder.scan_once, doubles


def text_plain(scan: Any, doubles: list[bool], text: str | None) -> dict[str, Any] | None:
    """The object a stored text holds when the text is shown, without rfc8785, to be RFC 8785's
    form of it; None when not shown (the caller asks rfc8785). For integers of at most 2**53 - 1,
    strings, booleans, null, arrays, and objects whose keys are in the Basic Multilingual Plane,
    canonical_json writes what RFC 8785 writes: the same escapes, separators, key order and
    integers (rfc8785's string escapes are Python's json ones)."""
    if not text:
        return None
    doubles.clear()
    try:
        value, end = scan(text, 0)
    except (StopIteration, ValueError, RecursionError):
        return None
    if end != len(text) or doubles or type(value) is not dict or json_plain(value) != text:
        return None
    if not text.isascii() and NOT_BMP.search(text):
        return None
    return value


def columns_are_text(row: tuple, text: str, scan: Any, doubles: list[bool]) -> bool:
    """Whether a version 2 row's columns (a _WALK_FIELDS tuple), as hashed_row gives them and
    canonical_json writes them, are exactly its stored text, which is then RFC 8785."""
    (seq, _, _, _, _, at, actor, user_id, username, action, run_id, approval_id, tool) = row[:13]
    data_text, ip, user_agent = row[13:]
    doubles.clear()
    try:
        data, end = scan(data_text, 0)
    except (StopIteration, ValueError, RecursionError, TypeError):
        return False
    if doubles or end != len(data_text):
        return False
    if isinstance(at, dt.datetime):
        at = at.isoformat()
    elif len(at) != 32:  # not 4-digit years: Python reads none beyond 9999
        return False
    elif at.endswith(".000000+00:00"):  # isoformat leaves out a zero fraction
        at = at[:19] + "+00:00"
    for number in (seq, user_id, approval_id):
        if number is not None and not -SAFE_INTEGER <= number <= SAFE_INTEGER:
            return False
    record = {
        "action": action,
        "actor": actor,
        "actor_user_id": user_id,
        "actor_username": username,
        "approval_id": approval_id,
        "at": at,
        "chain_version": CHAIN_VERSION,
        "data": data,
        "ip": _ip_text(ip) if ip is not None else None,
        "run_id": str(run_id) if run_id else None,  # uuid, or its text from Postgres
        "seq": seq,
        "tool": tool,
        "user_agent": user_agent,
    }
    return json_plain(record) == text and (text.isascii() or not NOT_BMP.search(text))
