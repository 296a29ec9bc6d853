"""The first event of a transaction in one round trip: the chain lock, then an INSERT that
reads the head and computes seq, canonical text and hash in SQL.

Chain version 2 hashes ``sha256(prev_hash + canonical)`` and the canonical text holds ``seq``
as a plain integer between ``"run_id"`` and ``"tool"`` (RFC 8785 sorts the keys), so the text
is ``prefix || seq || suffix`` with prefix and suffix built here, in Python, from the same
fields ``record_text`` uses. On Postgres the lock and the INSERT stay two statements sent as one
query (the INSERT's snapshot is taken once the lock is granted); on SQLite writers are already
serialised by ``BEGIN IMMEDIATE`` and ``SHA256`` is the function Django registers.
"""

from __future__ import annotations

from typing import Any

from django.db import connection

from audit.models import AuditEvent

# The hashed fields' columns, written as given; seq, prev_hash, hash, canonical come from SQL.
_GIVEN = (
    "at",
    "actor",
    "actor_user_id",
    "actor_username",
    "action",
    "run_id",
    "approval_id",
    "tool",
    "data",
    "ip",
    "user_agent",
    "chain_version",
)
_SEQ_KEY = ',"seq":'


def text_split(text: str) -> tuple[str, str]:
    """(prefix, suffix) of a canonical text around its top-level seq value.

    Only strings follow seq at the top level ("tool", "user_agent"), and a JSON string cannot
    hold an unescaped quote, so the last ``,"seq":`` is the top-level one."""
    at = text.rindex(_SEQ_KEY) + len(_SEQ_KEY)
    end = text.index(",", at)
    return text[:at], text[end:]


def one_trip_supported() -> bool:
    """Several statements with parameters in one execute need client-side binding on psycopg."""
    if connection.vendor == "sqlite":
        return True
    options = connection.settings_dict.get("OPTIONS") or {}
    return connection.vendor == "postgresql" and not options.get("server_side_binding")


def event_insert_at_head(
    event: AuditEvent, *, lock_key: int, genesis: str, prefix: str, suffix: str
) -> None:
    """Insert ``event`` after the current head; set its pk, seq, prev_hash, hash, canonical."""
    table = connection.ops.quote_name(AuditEvent._meta.db_table)
    fields = [AuditEvent._meta.get_field(name) for name in _GIVEN]
    columns = [connection.ops.quote_name(f.column) for f in fields]
    params: list[Any] = [f.get_db_prep_save(getattr(event, f.attname), connection) for f in fields]
    head_seq = f"(SELECT COALESCE(MAX(seq), 0) FROM {table})"
    head_hash = f"COALESCE((SELECT hash FROM {table} ORDER BY seq DESC LIMIT 1), '{genesis}')"
    new_seq = f"CAST({head_seq} + 1 AS TEXT)"
    text = f"(%s || {new_seq} || %s)"
    if connection.vendor == "postgresql":
        digest = f"encode(sha256(convert_to({head_hash} || {text}, 'UTF8')), 'hex')"
        lock = f"SELECT pg_advisory_xact_lock({int(lock_key)}); "
    else:
        digest = f"SHA256({head_hash} || {text})"
        lock = ""
    sql = (
        f"{lock}INSERT INTO {table} ({', '.join(columns)}, seq, prev_hash, hash, canonical) "
        f"VALUES ({', '.join(['%s'] * len(params))}, {head_seq} + 1, {head_hash}, {digest}, "
        f"{text}) RETURNING id, seq, prev_hash, hash, canonical"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, prefix, suffix, prefix, suffix])
        if lock:
            cursor.nextset()
        event.pk, event.seq, event.prev_hash, event.hash, event.canonical = cursor.fetchone()
    event._state.adding = False
    event._state.db = connection.alias
