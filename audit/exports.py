"""Streaming CSV and JSONL exports in constant memory (see docs/audit.md for the file format)."""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Iterator
from itertools import islice
from typing import Any

from django.db.models import QuerySet

from audit.canonical import canonical_json
from audit.fast_json import json_plain, text_parse
from audit.models import AuditExport
from audit.services import CHAIN_VERSION, HASHED_FIELDS, export_complete, hashed_row
from audit.verify import JSONL_FORMAT, digest_start

CSV_FORMAT = "audit-csv/1"
CSV_COLUMNS = (*HASHED_FIELDS, "prev_hash", "hash")
CONTENT_TYPES = {
    AuditExport.Format.CSV: "text/csv; charset=utf-8",
    AuditExport.Format.JSONL: "application/x-ndjson; charset=utf-8",
}
# Spreadsheet programs run cells that start with these as formulas.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def export_filename(export: AuditExport) -> str:
    return f"audit-export-{export.pk}.{export.format}"


def export_header(export: AuditExport) -> dict[str, Any]:
    return {
        "record": "header",
        "format": JSONL_FORMAT if export.format == AuditExport.Format.JSONL else CSV_FORMAT,
        "export_id": export.pk,
        "created_at": export.created_at.isoformat(),
        "created_by": export.created_by_label,
        "filters": export.filters,
        "head_seq": export.head_seq,
        "head_hash": export.head_hash,
    }


class _Echo:
    """csv.writer target that hands back the line instead of storing it."""

    def write(self, value: str) -> str:
        return value


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return canonical_json(value)
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _export_row(values: dict[str, Any]) -> dict[str, Any]:
    """One event as the file writes it. A version 2 row: the fields as its stored text says
    them (so numbers are the hashed ones), plus that text and its chain_version; a version 1
    row: its fields. Then the two hashes."""
    version, text = values.pop("chain_version"), values.pop("canonical")
    if version == CHAIN_VERSION:
        row = text_parse(text)
        row["canonical"] = text
    else:
        row = hashed_row(values)
    row["prev_hash"], row["hash"] = values["prev_hash"], values["hash"]
    return row


def _batches(rows: Iterator[tuple], size: int) -> Iterator[list[tuple]]:
    while batch := list(islice(rows, size)):
        yield batch


def export_stream(
    *,
    export: AuditExport,
    events: QuerySet,
    chunk_size: int = 5000,
    flush_bytes: int = 64 * 1024,
) -> Iterator[bytes]:
    """Yield the file in ~flush_bytes pieces; after the last piece, complete the manifest.

    `events` is the filtered, permitted queryset; only events up to the export's head are
    written, oldest first, so the file is one consistent snapshot.

    A version 2 line is its stored text's fields plus four keys: only those five columns are
    read (no jsonb, datetime or uuid to convert), and the line is written by the prebuilt C
    encoder. Version 1 rows have their columns fetched per batch. The bytes are the ones the
    export always wrote (tests/audit/test_export_bytes.py).
    """
    names = (*HASHED_FIELDS, "prev_hash", "hash", "chain_version", "canonical")
    selected = events.filter(seq__lte=export.head_seq).order_by("seq")
    rows = selected.values_list("seq", "chain_version", "canonical", "prev_hash", "hash")
    jsonl = export.format == AuditExport.Format.JSONL
    header = export_header(export)
    writer = csv.writer(_Echo())
    file_hash = hashlib.sha256()
    digest = digest_start(header)
    sha256 = hashlib.sha256
    count = 0
    first_seq: int | None = None
    last_seq: int | None = None
    buffer: list[str] = []
    size = 0

    if jsonl:
        buffer.append(canonical_json(header) + "\n")
    else:
        buffer.append(writer.writerow(CSV_COLUMNS))
    for batch in _batches(rows.iterator(chunk_size=chunk_size), chunk_size):
        legacy = [values[0] for values in batch if values[1] != CHAIN_VERSION]
        columns = (
            {values[0]: values for values in selected.filter(seq__in=legacy).values_list(*names)}
            if legacy
            else {}
        )
        lines = []
        for seq, version, text, prev_hash, hash_hex in batch:
            if version == CHAIN_VERSION:
                values = {"chain_version": version, "canonical": text}
            else:
                values = dict(zip(names, columns[seq], strict=True))
            values["prev_hash"], values["hash"] = prev_hash, hash_hex
            row = _export_row(values)
            if jsonl:
                row["record"] = "event"
                # A parsed text holds only JSON types: the prebuilt C encoder writes the
                # bytes canonical_json writes. Version 1 rows keep canonical_json.
                plain = version == CHAIN_VERSION and type(row) is dict
                lines.append((json_plain(row) if plain else canonical_json(row)) + "\n")
            else:
                lines.append(writer.writerow([_csv_cell(row[name]) for name in CSV_COLUMNS]))
            digest = sha256((digest + row["hash"]).encode()).hexdigest()
            first_seq = first_seq or row["seq"]
            last_seq = row["seq"]
        count += len(batch)
        for line in lines:
            buffer.append(line)
            size += len(line)
            if size >= flush_bytes:
                chunk = "".join(buffer).encode("utf-8")
                file_hash.update(chunk)
                yield chunk
                buffer, size = [], 0
    if jsonl:
        summary = {
            "record": "summary",
            "count": count,
            "first_seq": first_seq,
            "last_seq": last_seq,
            "digest": digest,
        }
        buffer.append(canonical_json(summary) + "\n")
    chunk = "".join(buffer).encode("utf-8")
    file_hash.update(chunk)
    yield chunk
    export_complete(
        export=export,
        row_count=count,
        first_seq=first_seq,
        last_seq=last_seq,
        digest=digest,
        file_sha256=file_hash.hexdigest(),
    )
