"""Recompute the hash chain: from the database, or offline from an exported JSONL file."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from audit.canonical import canonical_json, sha256_hex
from audit.models import AuditEvent
from audit.services import GENESIS_HASH, HASHED_FIELDS, event_hash, hashed_row

JSONL_FORMAT = "audit-jsonl/1"
EVENT_KEYS = frozenset((*HASHED_FIELDS, "record", "prev_hash", "hash"))


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


def chain_verify_db(*, chunk_size: int = 2000) -> VerifyResult:
    """Walk the whole chain in seq order, in constant memory."""
    result = VerifyResult()
    expected_seq = 1
    prev_hash = GENESIS_HASH
    rows = AuditEvent.objects.order_by("seq").values(*HASHED_FIELDS, "prev_hash", "hash")
    for values in rows.iterator(chunk_size=chunk_size):
        seq = values["seq"]
        if seq != expected_seq:
            return result.fail(
                seq=expected_seq, reason=f"seq {expected_seq} is missing (next row is {seq})"
            )
        if values["prev_hash"] != prev_hash:
            return result.fail(seq=seq, reason="prev_hash does not match the previous row's hash")
        if event_hash(prev_hash, hashed_row(values)) != values["hash"]:
            return result.fail(seq=seq, reason="hash does not match the row's content")
        prev_hash = values["hash"]
        result.count += 1
        result.first_seq = result.first_seq or seq
        result.last_seq = seq
        result.head_hash = prev_hash
        expected_seq += 1
    return result


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
                or record.get("format") != JSONL_FORMAT
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
        if kind != "event" or set(record) != EVENT_KEYS:
            return result.fail(seq=None, reason=f"line {line_no} is not an event record"), info
        seq = record["seq"]
        row = {name: record[name] for name in HASHED_FIELDS}
        if event_hash(record["prev_hash"], row) != record["hash"]:
            return result.fail(seq=seq, reason="hash does not match the row's content"), info
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
