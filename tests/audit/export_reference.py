"""The JSONL/CSV export as audit/exports.py wrote it before the fast path (frozen copy, minus
the manifest completion): the byte-for-byte oracle of test_export_bytes.py. Do not "improve"."""

from __future__ import annotations

import csv
from typing import Any

from django.db.models import QuerySet

from audit.canonical import canonical_json, canonical_parse
from audit.exports import CSV_COLUMNS, _csv_cell, _Echo, export_header
from audit.models import AuditExport
from audit.services import CHAIN_VERSION, HASHED_FIELDS, hashed_row


def _export_row(values: dict[str, Any]) -> dict[str, Any]:
    version, text = values.pop("chain_version"), values.pop("canonical")
    if version == CHAIN_VERSION:
        row = canonical_parse(text)
        row["canonical"] = text
    else:
        row = hashed_row(values)
    row["prev_hash"], row["hash"] = values["prev_hash"], values["hash"]
    return row


def reference_export(*, export: AuditExport, events: QuerySet) -> bytes:
    """Header and event lines (no summary: its digest is checked by the verifier)."""
    names = (*HASHED_FIELDS, "prev_hash", "hash", "chain_version", "canonical")
    rows = events.filter(seq__lte=export.head_seq).order_by("seq").values_list(*names)
    jsonl = export.format == AuditExport.Format.JSONL
    writer = csv.writer(_Echo())
    out = [canonical_json(export_header(export)) + "\n" if jsonl else writer.writerow(CSV_COLUMNS)]
    for values in rows.iterator(chunk_size=2000):
        row = _export_row(dict(zip(names, values, strict=True)))
        if jsonl:
            row["record"] = "event"
            out.append(canonical_json(row) + "\n")
        else:
            out.append(writer.writerow([_csv_cell(row[name]) for name in CSV_COLUMNS]))
    return "".join(out).encode("utf-8")
