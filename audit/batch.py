"""Appending many events at once: one chain lock and head read, then one multi-row INSERT.

``events_record`` is ``event_record`` for a list (the sweep's chunks): each event is hashed
exactly as ``audit.services`` hashes one (the same helpers, chained in order), so the rows are
indistinguishable from events appended one by one and ``verify()`` checks them alike.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import uuid
from collections.abc import Mapping
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from audit.canonical import canonical_parse
from audit.models import AuditEvent
from audit.private import data_with_private
from audit.services import (
    CHAIN_VERSION,
    _actor_fields,
    _head_locked,
    _head_remember,
    event_row,
    record_hash,
    record_text,
)
from core.sealing import datakey_scope, datakeys_prefetch

# The keys an event may have (event_record's arguments without ``request``: batches are the
# system's own events, which carry no client address).
_KEYS = frozenset({"action", "actor", "run_id", "approval_id", "tool", "data", "private"})


def events_record(events: list[Mapping[str, Any]]) -> list[AuditEvent]:
    """Append ``events`` (dicts of ``event_record``'s arguments) to the chain, in order, in the
    caller's transaction: one chain lock and head read, one INSERT. Returns the rows."""
    if not events:
        return []
    for event in events:
        unknown = set(event) - _KEYS
        if unknown or "action" not in event:
            raise TypeError(f"events_record: bad event keys {sorted(unknown) or ['action']}")
    block = contextlib.nullcontext() if connection.in_atomic_block else transaction.atomic()
    rows: list[AuditEvent] = []
    with block:
        # Sealed before the chain's lock is taken, the runs' keys read in one query.
        with datakey_scope():
            datakeys_prefetch(e.get("run_id") for e in events if e.get("private") is not None)
            datas = [
                data_with_private(e.get("data"), run_id=e.get("run_id"), private=e.get("private"))
                for e in events
            ]
        seq, prev_hash = _head_locked()
        at = timezone.now()
        for event, data in zip(events, datas, strict=True):
            label, user_id, username = _actor_fields(event.get("actor"))
            run_id = event.get("run_id")
            approval_id = event.get("approval_id")
            seq += 1
            row = AuditEvent(
                seq=seq,
                at=at,
                actor=label[:200],
                actor_user_id=user_id,
                actor_username=username[:150],
                action=event["action"],
                run_id=uuid.UUID(str(run_id)) if run_id else None,
                approval_id=int(approval_id) if approval_id is not None else None,
                tool=event.get("tool") or "",
                data=data,
                ip=None,
                user_agent="",
                prev_hash=prev_hash,
                chain_version=CHAIN_VERSION,
            )
            row.canonical = record_text(event_row(row))
            # The jsonb holds the parsed text, so its values are the hashed ones (verify checks).
            row.data = canonical_parse(row.canonical)["data"]
            row.hash = prev_hash = record_hash(prev_hash, row.canonical)
            rows.append(row)
        _insert(rows)
        _head_remember(seq, prev_hash)
    return rows


def _insert(rows: list[AuditEvent]) -> None:
    """One INSERT of ``rows``, their ids set. On Postgres the rows travel as one JSON text
    (``json_populate_recordset``): Django 5.2's ``bulk_create`` sends each column as an array,
    and psycopg escapes every element of a text array in Python (a regex per string), most of a
    chunk's insert time for the long canonical texts; one JSON document is encoded in C and
    quoted once. Every value is of a JSON-native type (text, integers, null, the parsed
    ``data``) or an ISO timestamp or UUID text Postgres reads back exactly, so the stored
    values and bytes are the ones ``bulk_create`` stores (``verify()`` rehashes them)."""
    if connection.vendor != "postgresql":
        AuditEvent.objects.bulk_create(rows)
        return
    fields = [f for f in AuditEvent._meta.concrete_fields if not f.primary_key]
    document = json.dumps(
        [{f.column: _json_value(getattr(row, f.attname)) for f in fields} for row in rows],
        ensure_ascii=False,
    )
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    table = connection.ops.quote_name(AuditEvent._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({columns}) SELECT {columns} "  # noqa: S608 - our names
            f"FROM json_populate_recordset(NULL::{table}, %s::json) ORDER BY seq "
            'RETURNING "id", "seq"',
            [document],
        )
        ids = {seq: pk for pk, seq in cursor.fetchall()}
    for row in rows:
        row.pk = ids[row.seq]
        row._state.adding = False
        row._state.db = connection.alias


def _json_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value
