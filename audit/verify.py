"""Recompute the hash chain: from the database, or offline from an exported JSONL file."""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import rfc8785
from django.db import connection
from django.db.models import F, TextField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast

from audit import fast_bytes
from audit.canonical import canonical_json, canonical_parse, sha256_hex
from audit.fast_json import (
    columns_are_text,
    plain_scanner,
    text_plain,
)
from audit.models import AuditEvent
from audit.services import (
    CHAIN_VERSION,
    GENESIS_HASH,
    HASHED_FIELDS,
    event_hash,
    hashed_row,
    record_hash,
)

# Files of version 1 hold only chain version 1 lines; version 2 files may hold both kinds;
# version 3 files are version 2 files whose event lines also carry "opened" (each event's data
# with its sealed keys opened, or "erased"): outside the hash, ignored here.
JSONL_FORMAT = "audit-jsonl/2"
JSONL_FORMAT_OPENED = "audit-jsonl/3"
JSONL_FORMATS = ("audit-jsonl/1", JSONL_FORMAT, JSONL_FORMAT_OPENED)
OPENED_KEY = "opened"
EVENT_KEYS = frozenset((*HASHED_FIELDS, "record", "prev_hash", "hash"))
# A chain version 2 line adds the stored text it was hashed over, and its chain_version.
EVENT_KEYS_V2 = EVENT_KEYS | {"chain_version", "canonical"}
RECORD_KEYS_V2 = frozenset(("chain_version", *HASHED_FIELDS))
DB_FIELDS = (*HASHED_FIELDS, "prev_hash", "hash", "chain_version", "canonical")


@dataclass
class VerifyResult:
    """What a verification found; `broken_seq` is the first seq that fails, if any."""

    ok: bool = True
    count: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    head_hash: str = GENESIS_HASH
    broken_seq: int | None = None
    reason: str = ""
    notes: list[str] = field(default_factory=list)

    def fail(self, *, seq: int | None, reason: str) -> VerifyResult:
        self.ok = False
        self.broken_seq = seq
        self.reason = reason
        return self

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "count": self.count,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "head_hash": self.head_hash,
            "broken_seq": self.broken_seq,
            "reason": self.reason,
            "notes": list(self.notes),
        }


def digest_start(header: Mapping[str, Any]) -> str:
    """The running digest of a JSONL export starts from its header..."""
    return sha256_hex(canonical_json(dict(header)))


def digest_step(digest: str, event_hash_hex: str) -> str:
    """...and folds in each exported event's hash, in file order."""
    return sha256_hex(digest + event_hash_hex)


def json_same(a: Any, b: Any) -> bool:
    """Equal as JSON values, numbers by value: what a jsonb column keeps of a parsed text (it
    may write 1e+21 as 1000000000000000000000, or 1.0 as 1.0 where the text says 1)."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return _number(a) == _number(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _number(value: int | float) -> decimal.Decimal:
    return decimal.Decimal(repr(value)) if isinstance(value, float) else decimal.Decimal(value)


def record_problem(values: Mapping[str, Any]) -> str:
    """Why a chain version 2 row (a .values() dict) does not verify, or "": its hash covers its
    stored text, the text is RFC 8785, and every column still says what the text says."""
    text = values["canonical"]
    if not text:
        return "chain_version 2 row without its canonical text"
    if record_hash(values["prev_hash"], text) != values["hash"]:
        return "hash does not match the row's canonical text"
    scan, doubles = plain_scanner()
    try:
        record = text_plain(scan, doubles, text)
        if record is None:
            record = canonical_parse(text)
            # Already plain JSON with doubles for big integers: rfc8785 itself, without the
            # conversions canonical_text makes for other callers.
            canonical = rfc8785.dumps(record).decode("utf-8")
        else:
            canonical = text
    except (ValueError, RecursionError):  # rfc8785.CanonicalizationError is a ValueError
        return "the canonical text is not RFC 8785 JSON"
    if canonical != text or not isinstance(record, dict) or set(record) != RECORD_KEYS_V2:
        return "the canonical text is not an RFC 8785 record"
    if record["chain_version"] != CHAIN_VERSION:
        return "the canonical text names another chain_version"
    columns = hashed_row(values)
    for name in HASHED_FIELDS:
        stored, hashed = columns[name], record[name]
        if name == "at":
            stored, hashed = values["at"], _when(hashed)
        if not json_same(stored, hashed):
            return f"column {name} differs from the canonical text"
    return ""


def _when(text: Any) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None


def _row_problem(values: Mapping[str, Any], *, prev_hash: str) -> str:
    """Why one row (a .values() dict of DB_FIELDS) does not verify after ``prev_hash``, or ""."""
    if values["prev_hash"] != prev_hash:
        return "prev_hash does not match the previous row's hash"
    if values["chain_version"] == CHAIN_VERSION:
        return record_problem(values)
    if values["chain_version"] != 1:
        return f"unknown chain_version {values['chain_version']}"
    if event_hash(prev_hash, hashed_row(values)) != values["hash"]:
        return "hash does not match the row's content"
    return ""


# What the walk reads per row: the row's columns as stored (data as its JSON text).
_WALK_FIELDS = (
    "seq",
    "chain_version",
    "canonical",
    "prev_hash",
    "hash",
    "at_text",
    "actor",
    "actor_user_id",
    "actor_username",
    "action",
    "run_text",
    "approval_id",
    "tool",
    "data_text",
    "ip",
    "user_agent",
)


def _walk_columns() -> dict[str, Any]:
    """data as its JSON text; on Postgres also `at` as Python's isoformat of it in UTC and
    run_id as text, written by the database (Django's Python datetime and uuid loaders were
    half of the walk's time). Elsewhere those two are the model's values."""
    columns: dict[str, Any] = {"data_text": Cast("data", TextField())}
    if connection.vendor == "postgresql":
        table = connection.ops.quote_name(AuditEvent._meta.db_table)
        columns["at_text"] = RawSQL(
            f'to_char({table}."at" AT TIME ZONE \'UTC\', \'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"\')',
            [],
        )
        columns["run_text"] = RawSQL(f'{table}."run_id"::text', [])
    else:
        columns["at_text"], columns["run_text"] = F("at"), F("run_id")
    return columns


def chain_verify_db(*, chunk_size: int = 5000) -> VerifyResult:
    """Walk the whole chain in seq order, in constant memory.

    A version 2 row is shown good at once when its hash holds and its columns, written as
    canonical_json, are its stored text, byte for byte: then the text says what the columns
    say and (for integers up to 2**53 - 1, no doubles, characters in the Basic Multilingual
    Plane) it is RFC 8785's form of them, which is all record_problem checks (written by orjson,
    fast_bytes.columns_are_text, where installed). Every other row goes through record_problem /
    the version 1 check, which names what is wrong."""
    result = VerifyResult()
    expected_seq = 1
    prev_hash = GENESIS_HASH
    scan, doubles = plain_scanner()
    ips: dict[Any, Any] = {}
    sha256 = hashlib.sha256
    rows = AuditEvent.objects.order_by("seq").annotate(**_walk_columns()).values_list(*_WALK_FIELDS)
    for row in rows.iterator(chunk_size=chunk_size):
        seq, version, text, row_prev, row_hash = row[:5]
        if seq != expected_seq:
            return result.fail(
                seq=expected_seq, reason=f"seq {expected_seq} is missing (next row is {seq})"
            )
        if not (
            version == CHAIN_VERSION
            and row_prev == prev_hash
            and text
            and sha256(row_prev.encode() + (data := text.encode())).hexdigest() == row_hash
            and (
                fast_bytes.columns_are_text(row, data, ips)
                if fast_bytes.AVAILABLE
                else columns_are_text(row, text, scan, doubles)
            )
        ):
            values = AuditEvent.objects.filter(seq=seq).values(*DB_FIELDS).get()
            problem = _row_problem(values, prev_hash=prev_hash)
            if problem:
                return result.fail(seq=seq, reason=problem)
        prev_hash = row_hash
        result.count += 1
        result.first_seq = result.first_seq or seq
        result.last_seq = seq
        result.head_hash = prev_hash
        expected_seq += 1
    return result


def _line_problem(record: dict[str, Any], *, kind: Any, line_no: int) -> tuple[str, int | None]:
    """(why an event line's own hash does not hold, at which seq), or ("", None)."""
    if kind == "event" and set(record) == EVENT_KEYS:
        row = {name: record[name] for name in HASHED_FIELDS}
        if event_hash(record["prev_hash"], row) != record["hash"]:
            return "hash does not match the row's content", record["seq"]
        return "", None
    if (
        kind != "event"
        or set(record) != EVENT_KEYS_V2
        or record["chain_version"] != CHAIN_VERSION
        or not isinstance(record["seq"], int)
        or not all(isinstance(record[k], str) for k in ("canonical", "prev_hash", "hash"))
    ):
        return f"line {line_no} is not an event record", None
    text, seq = record["canonical"], record["seq"]
    if record_hash(record["prev_hash"], text) != record["hash"]:
        return "hash does not match the row's canonical text", seq
    try:
        inner = canonical_parse(text)
    except ValueError:
        return "the canonical text is not JSON", seq
    fields = {k: v for k, v in record.items() if k in RECORD_KEYS_V2}
    if not isinstance(inner, dict) or not json_same(inner, fields):
        return "the line's fields differ from its canonical text", seq
    return "", None


def export_file_verify(lines: Iterable[bytes | str]) -> tuple[VerifyResult, dict[str, Any]]:
    """Check a JSONL export from the file alone; returns the result and the parsed header
    merged with the summary (export id, filters, head, digest, file sha256).

    Checks: header first and summary last; each event's hash recomputes from its own fields;
    seqs strictly increase; events with consecutive seqs chain (prev_hash = previous hash); an
    unfiltered export covers every seq from 1 to the head, starts at the genesis hash and ends
    at the head hash; count, first/last seq and the running digest equal the summary's.
    """
    result = VerifyResult()
    info: dict[str, Any] = {}
    file_hash = hashlib.sha256()
    header: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    digest = ""
    prev: dict[str, Any] | None = None
    line_no = 0
    for raw in lines:
        line_no += 1
        data = raw.encode("utf-8") if isinstance(raw, str) else raw
        file_hash.update(data)
        text = data.decode("utf-8").rstrip("\n")
        if not text:
            return result.fail(seq=None, reason=f"line {line_no} is empty"), info
        try:
            record = json.loads(text)
        except json.JSONDecodeError:
            return result.fail(seq=None, reason=f"line {line_no} is not JSON"), info
        kind = record.get("record") if isinstance(record, dict) else None
        if summary is not None:
            return result.fail(seq=None, reason=f"line {line_no} follows the summary"), info
        if header is None:
            if (
                kind != "header"
                or record.get("format") not in JSONL_FORMATS
                or not isinstance(record.get("head_seq"), int)
                or not isinstance(record.get("head_hash"), str)
            ):
                return result.fail(seq=None, reason=f"line 1 is not a {JSONL_FORMAT} header"), info
            header = record
            info.update(header)
            digest = digest_start(header)
            continue
        if kind == "summary":
            summary = record
            continue
        if header["format"] == JSONL_FORMAT_OPENED and isinstance(record, dict):
            record.pop(OPENED_KEY, None)  # a reading aid, not part of what was hashed
        problem, at_seq = _line_problem(record, kind=kind, line_no=line_no)
        if problem:
            return result.fail(seq=at_seq, reason=problem), info
        seq = record["seq"]
        if prev is not None:
            if seq <= prev["seq"]:
                return result.fail(
                    seq=seq, reason=f"seq {seq} comes after seq {prev['seq']} (reordered)"
                ), info
            if seq == prev["seq"] + 1 and record["prev_hash"] != prev["hash"]:
                return result.fail(seq=seq, reason="prev_hash does not match seq before it"), info
        if not header.get("filters"):
            expected = prev["seq"] + 1 if prev else 1
            if seq != expected:
                return result.fail(
                    seq=expected, reason=f"seq {expected} is missing from an unfiltered export"
                ), info
            if seq == 1 and record["prev_hash"] != GENESIS_HASH:
                return result.fail(seq=seq, reason="seq 1 does not start at the genesis hash"), info
        if seq > header["head_seq"]:
            return result.fail(seq=seq, reason="seq is past the export's head"), info
        if seq == header["head_seq"] and record["hash"] != header["head_hash"]:
            return result.fail(
                seq=seq, reason="head event differs from the header's head_hash"
            ), info
        digest = digest_step(digest, record["hash"])
        result.count += 1
        result.first_seq = result.first_seq or seq
        result.last_seq = seq
        result.head_hash = record["hash"]
        prev = record
    if header is None:
        return result.fail(seq=None, reason="the file is empty"), info
    if summary is None:
        return result.fail(seq=None, reason="the summary line is missing (file truncated?)"), info
    info.update({k: v for k, v in summary.items() if k != "record"})
    info["file_sha256"] = file_hash.hexdigest()
    if not header.get("filters") and result.last_seq != (header["head_seq"] or None):
        return result.fail(
            seq=(result.last_seq or 0) + 1, reason="an unfiltered export stops before its head"
        ), info
    checks = (
        ("count", result.count),
        ("first_seq", result.first_seq),
        ("last_seq", result.last_seq),
        ("digest", digest),
    )
    for name, value in checks:
        if summary.get(name) != value:
            return result.fail(
                seq=None,
                reason=f"summary {name} is {summary.get(name)!r}, the file gives {value!r}",
            ), info
    return result, info
