"""The export's line and the verifier's column check written by orjson, on UTF-8 bytes.

orjson (a dependency of langgraph-checkpoint-postgres, so always installed with it) parses and
writes JSON in C, 3 to 5 times faster than the standard library. It writes exactly what
canonical_json writes for objects, arrays, strings (every code point: the same escapes, keys
in the same order), integers and true/false/null; it spells some doubles otherwise (1e-7
where Python writes 1e-07). So these paths take only texts without doubles and without
integers beyond 2**53 - 1 (OPT_STRICT_INTEGER refuses those), and answer None / False for
everything else, which the callers hand to the standard-library path as before.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from audit.fast_json import NOT_BMP
from audit.services import CHAIN_VERSION, _ip_text

try:
    import orjson
except ImportError:  # pragma: no cover - installed with langgraph-checkpoint-postgres
    orjson = None

AVAILABLE = orjson is not None
_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER if orjson else 0
_LINE_OPTIONS = _OPTIONS | orjson.OPT_APPEND_NEWLINE if orjson else 0
# Delete digits and signs and write e/E as ".": a number with a fraction or an exponent then
# leaves a "." right after the ':', '[' or ',' before it, and an integer leaves nothing.
_MARKS = bytes.maketrans(b"eE", b"..")
_DIGITS = b"0123456789+-"
# Distinct client addresses columns_are_text keeps spelled at once (then it starts again).
_IPS_KEPT = 1024


def no_double(data: bytes) -> bool:
    """Whether a JSON text without whitespace outside its strings holds no number with a
    fraction or an exponent. A string may raise a false alarm (the caller then takes the slow
    path); a double never goes unseen: its token starts right after '":', '[' or ','."""
    marks = data.translate(_MARKS, _DIGITS)
    return b'":.' not in marks and b"[." not in marks and b",." not in marks


def event_line(text: str, prev_hash: str, hash_hex: str) -> tuple[bytes, Any] | None:
    """(the JSONL line of a version 2 row, the seq its text names) when the stored text is
    exactly orjson's (= canonical_json's) writing of what it holds and holds no double, else
    None. The line is canonical_json of the text's fields plus canonical, prev_hash, hash and
    record: what audit/exports.py always wrote."""
    data = text.encode()
    try:
        value = orjson.loads(data)
        if (
            type(value) is not dict
            or "seq" not in value
            or orjson.dumps(value, option=_OPTIONS) != data
        ):
            return None
        marks = data.translate(_MARKS, _DIGITS)  # no_double(data), inline: once per row
        if b'":.' in marks or b"[." in marks or b",." in marks:
            return None
        value["canonical"] = text
        value["prev_hash"], value["hash"] = prev_hash, hash_hex
        value["record"] = "event"
        return orjson.dumps(value, option=_LINE_OPTIONS), value["seq"]
    except (ValueError, TypeError):  # orjson's decode / encode errors (surrogates, big integers)
        return None


def columns_are_text(row: tuple, data: bytes, ips: dict[Any, Any]) -> bool:
    """fast_json.columns_are_text with orjson: whether a version 2 row's columns (a
    _WALK_FIELDS tuple, `at` and run_id as the database's text), as hashed_row gives them,
    written as canonical_json, are exactly its stored text (`data`, UTF-8), which is then
    RFC 8785 (no doubles, integers within 2**53 - 1, keys in the Basic Multilingual Plane).
    `ips` caches _ip_text per address for one walk."""
    (seq, _, text, _, _, at, actor, user_id, username, action, run_id, approval_id, tool) = row[:13]
    data_text, ip, user_agent = row[13:]
    if isinstance(at, dt.datetime):  # SQLite: the model's value
        at = at.isoformat()
    elif len(at) != 32:  # not 4-digit years: Python reads none beyond 9999
        return False
    elif at.endswith(".000000+00:00"):  # isoformat leaves out a zero fraction
        at = at[:19] + "+00:00"
    if ip is not None:
        spelled = ips.get(ip)
        if spelled is None:
            if len(ips) >= _IPS_KEPT:  # bounded: the walk promises constant memory
                ips.clear()
            spelled = ips[ip] = _ip_text(ip)
        ip = spelled
    try:
        record = {
            "action": action,
            "actor": actor,
            "actor_user_id": user_id,
            "actor_username": username,
            "approval_id": approval_id,
            "at": at,
            "chain_version": CHAIN_VERSION,
            "data": orjson.loads(data_text),
            "ip": ip,
            "run_id": str(run_id) if run_id else None,  # uuid, or its text
            "seq": seq,
            "tool": tool,
            "user_agent": user_agent,
        }
        if orjson.dumps(record, option=_OPTIONS) != data:
            return False
    except (ValueError, TypeError):
        return False
    marks = data.translate(_MARKS, _DIGITS)  # no_double(data), inline: once per row
    if b'":.' in marks or b"[." in marks or b",." in marks:
        return False
    return text.isascii() or not NOT_BMP.search(text)
