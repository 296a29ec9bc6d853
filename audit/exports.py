"""Streaming CSV and JSONL exports in constant memory (see docs/audit.md for the file format)."""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Iterator
from itertools import islice
from typing import Any

from django.db.models import QuerySet

from audit.canonical import canonical_json
from audit.fast_bytes import AVAILABLE as FAST_AVAILABLE
from audit.fast_bytes import event_line
from audit.fast_json import json_plain, text_parse
from audit.manifests import export_complete
from audit.models import AuditExport
from audit.private import data_open, data_runs_sealed
from audit.services import CHAIN_VERSION, HASHED_FIELDS, hashed_row
from audit.verify import JSONL_FORMAT, JSONL_FORMAT_OPENED, OPENED_KEY, digest_start
from core.sealing import datakey_scope, datakeys_prefetch

CSV_FORMAT = "audit-csv/1"
CSV_COLUMNS = (*HASHED_FIELDS, "prev_hash", "hash")
# An opened export's extra CSV column: data with its sealed keys opened, or "erased".
CSV_OPENED_COLUMN = "data_opened"
CONTENT_TYPES = {
    AuditExport.Format.CSV: "text/csv; charset=utf-8",
    AuditExport.Format.JSONL: "application/x-ndjson; charset=utf-8",
}
# The columns of a version 1 row, fetched per batch.
_DB_NAMES = (*HASHED_FIELDS, "prev_hash", "hash", "chain_version", "canonical")
# Spreadsheet programs run cells that start with these as formulas.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def export_filename(export: AuditExport) -> str:
    return f"audit-export-{export.pk}.{export.format}"


def export_header(export: AuditExport) -> dict[str, Any]:
    jsonl = JSONL_FORMAT_OPENED if export.opened else JSONL_FORMAT
    return {
        "record": "header",
        "format": jsonl if export.format == AuditExport.Format.JSONL else CSV_FORMAT,
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


def _line(
    values: dict[str, Any],
    *,
    prev_hash: str,
    hash_hex: str,
    jsonl: bool,
    writer: Any,
    opened: Any = None,
) -> tuple[bytes, Any]:
    """(one event's line, the seq it names) by the standard library: version 1 rows, CSV, the
    version 2 texts fast_bytes.event_line leaves (doubles, big integers, other forms), and the
    lines of an opened export (``opened``: the event's data as a reader sees it)."""
    values["prev_hash"], values["hash"] = prev_hash, hash_hex
    version = values["chain_version"]
    row = _export_row(values)
    if opened is not None:
        row[OPENED_KEY] = row[CSV_OPENED_COLUMN] = opened
        if jsonl:
            del row[CSV_OPENED_COLUMN]
    if jsonl:
        row["record"] = "event"
        # A parsed text holds only JSON types: the prebuilt C encoder writes the bytes
        # canonical_json writes. Version 1 rows keep canonical_json.
        plain = version == CHAIN_VERSION and type(row) is dict
        text = (json_plain(row) if plain else canonical_json(row)) + "\n"
    else:
        columns = (*CSV_COLUMNS, CSV_OPENED_COLUMN) if opened is not None else CSV_COLUMNS
        text = writer.writerow([_csv_cell(row[name]) for name in columns])
    return text.encode(), row["seq"]


def _batch_opened(batch: list[tuple], columns: dict[Any, tuple]) -> dict[Any, Any]:
    """Each event's data with its sealed keys opened (or "erased"), by seq: the runs' keys
    read in one query per batch, in a key scope that ends with the batch (never across a
    yield of the stream)."""
    found: dict[Any, tuple[Any, Any]] = {}
    for seq, version, text, _, _ in batch:
        if version == CHAIN_VERSION:
            record = text_parse(text)
            found[seq] = (record["run_id"], record["data"])
        else:
            values = dict(zip(_DB_NAMES, columns[seq], strict=True))
            found[seq] = (values["run_id"], values["data"])
    with datakey_scope():
        datakeys_prefetch(data_runs_sealed(found.values()))
        return {seq: data_open(data, run_id=run_id) for seq, (run_id, data) in found.items()}


def _batches(rows: Iterator[tuple], size: int) -> Iterator[list[tuple]]:
    while batch := list(islice(rows, size)):
        yield batch


def export_stream(
    *,
    export: AuditExport,
    events: QuerySet,
    chunk_size: int = 2000,
    flush_bytes: int = 64 * 1024,
) -> Iterator[bytes]:
    """Yield the file in ~flush_bytes pieces; after the last piece, complete the manifest.

    `events` is the filtered, permitted queryset; only events up to the export's head are
    written, oldest first, so the file is one consistent snapshot.

    A version 2 line is its stored text's fields plus four keys: only those five columns are
    read (no jsonb, datetime or uuid to convert), and the line is written by orjson
    (fast_bytes.event_line) when the text is orjson's own writing without doubles, else by the
    standard library (_line). Version 1 rows have their columns fetched per batch. Lines go
    straight into one buffer, flushed every flush_bytes. The bytes are the ones the export
    always wrote (tests/audit/test_export_bytes.py, test_export_fast_lines.py).

    An opened export (compliance's choice) adds to each line the event's data with its sealed
    keys opened, or "erased" (JSONL key "opened", format audit-jsonl/3; CSV column
    data_opened), written by the standard library; the hashed fields stay as stored.
    """
    names = _DB_NAMES
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
    buffer = bytearray()
    opening = export.opened
    fast_lines = jsonl and FAST_AVAILABLE and not opening

    if jsonl:
        buffer += (canonical_json(header) + "\n").encode()
    else:
        header_row = (*CSV_COLUMNS, CSV_OPENED_COLUMN) if opening else CSV_COLUMNS
        buffer += writer.writerow(header_row).encode()
    for batch in _batches(rows.iterator(chunk_size=chunk_size), chunk_size):
        legacy = [values[0] for values in batch if values[1] != CHAIN_VERSION]
        columns = (
            {values[0]: values for values in selected.filter(seq__in=legacy).values_list(*names)}
            if legacy
            else {}
        )
        opened = _batch_opened(batch, columns) if opening else {}
        for seq, version, text, prev_hash, hash_hex in batch:
            fast = fast_lines and version == CHAIN_VERSION and event_line(text, prev_hash, hash_hex)
            if fast:
                line, row_seq = fast
            else:
                line, row_seq = _line(
                    {"chain_version": version, "canonical": text}
                    if version == CHAIN_VERSION
                    else dict(zip(names, columns[seq], strict=True)),
                    prev_hash=prev_hash,
                    hash_hex=hash_hex,
                    jsonl=jsonl,
                    writer=writer,
                    opened=opened.get(seq),
                )
            # Into one buffer at once: orjson's lines, kept 5,000 at a time, took 36 MiB.
            buffer += line
            digest = sha256((digest + hash_hex).encode()).hexdigest()
            first_seq = first_seq or row_seq
            last_seq = row_seq
            if len(buffer) >= flush_bytes:
                chunk = bytes(buffer)
                file_hash.update(chunk)
                yield chunk
                buffer.clear()
        count += len(batch)
    if jsonl:
        summary = {
            "record": "summary",
            "count": count,
            "first_seq": first_seq,
            "last_seq": last_seq,
            "digest": digest,
        }
        buffer += (canonical_json(summary) + "\n").encode()
    chunk = bytes(buffer)
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
