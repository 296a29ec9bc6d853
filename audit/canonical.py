"""Canonical JSON: the one byte form that hashes are computed over."""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import uuid
from typing import Any


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


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def payload_hash(payload: Any) -> str:
    """sha256 of the canonical JSON of a payload."""
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
