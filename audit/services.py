"""Writing to the audit trail. Call event_record() inside the transaction that changes state."""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import uuid
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from audit import append
from audit.canonical import canonical_json, canonical_parse, canonical_text, sha256_hex
from audit.models import AuditEvent
from audit.private import data_with_private

GENESIS_HASH = "0" * 64
# New events are version 2: hash = sha256(prev_hash + canonical), canonical = the RFC 8785 text
# of {"chain_version": 2, <HASHED_FIELDS>}, stored verbatim. Version 1 rows (before it) hash
# canonical_json of the fields and keep verifying as such (docs/audit.md, "Canonical form").
CHAIN_VERSION = 2
# Any constant works; it names the one advisory lock that serialises the chain head.
_CHAIN_LOCK_KEY = 727_001
COMPLIANCE_GROUP = "compliance"

# The fields the hash covers, in the order exports write them.
HASHED_FIELDS = (
    "seq",
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
)


def _actor_fields(actor: Any) -> tuple[str, int | None, str]:
    """(actor label, user id, username snapshot) for a user object or a 'system:'/'agent:' label."""
    if actor is None:
        return "system:unknown", None, ""
    if isinstance(actor, str):
        return actor, None, ""
    username = actor.get_username()
    return f"user:{actor.pk}", actor.pk, username


def event_hash(prev_hash: str, row: Mapping[str, Any]) -> str:
    """Chain version 1: sha256(prev_hash + canonical_json(row))."""
    return sha256_hex(prev_hash + canonical_json(row))


def record_text(row: Mapping[str, Any]) -> str:
    """Chain version 2: the RFC 8785 text of the record (CanonicalError if it has none)."""
    return canonical_text({"chain_version": CHAIN_VERSION, **row})


def record_hash(prev_hash: str, text: str) -> str:
    """Chain version 2: sha256 of the UTF-8 bytes of prev_hash followed by the stored text."""
    return sha256_hex(prev_hash + text)


def hashed_row(values: Mapping[str, Any]) -> dict[str, Any]:
    """The hashed fields of an event (model attributes or a .values() dict) in canonical form."""
    row = {name: values[name] for name in HASHED_FIELDS}
    if isinstance(row["at"], dt.datetime):
        row["at"] = row["at"].isoformat()
    row["run_id"] = str(row["run_id"]) if row["run_id"] else None
    if row["ip"] is not None:
        row["ip"] = _ip_text(row["ip"])
    return row


def event_row(event: AuditEvent) -> dict[str, Any]:
    """The fields that the hash covers, in their canonical form."""
    return hashed_row({name: getattr(event, name) for name in HASHED_FIELDS})


def _client_address(request: Any) -> Any:
    """The client's address: settings.AUDIT_CLIENT_ADDRESS (a dotted path to a function of
    the request, so the audit names the address the throttles and the lock-out count, behind
    trusted proxies too), else REMOTE_ADDR. audit imports nothing of ours."""
    getter = getattr(settings, "AUDIT_CLIENT_ADDRESS", "")
    if getter:
        return import_string(getter)(request)
    return request.META.get("REMOTE_ADDR")


def _ip_text(value: Any) -> str | None:
    # One spelling per address, so the hash does not depend on how the database prints it.
    if not value:
        return None
    try:
        return str(ipaddress.ip_address(str(value)))
    except ValueError:
        return None


def _lock_head() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CHAIN_LOCK_KEY])
    # SQLite: transactions are BEGIN IMMEDIATE (settings), so writers are already serialised.


def _head() -> tuple[int, str]:
    head = AuditEvent.objects.order_by("-seq").values_list("seq", "hash").first()
    return head if head else (0, GENESIS_HASH)


# The head read after the lock, in one round trip: two statements, so the SELECT takes its
# snapshot once the lock is granted (one statement would read the head as it was before it
# waited). No parameters, so psycopg sends it as one simple query, whatever the cursor.
_PG_LOCK_AND_HEAD = (
    f"SELECT pg_advisory_xact_lock({int(_CHAIN_LOCK_KEY)}); "
    f"SELECT seq, hash FROM {AuditEvent._meta.db_table} ORDER BY seq DESC LIMIT 1"
)


def _head_memo() -> tuple[int, str] | None:
    """The head as this transaction last wrote it, or None when the head must be read.

    Once this transaction appended an event, the head is that event for as long as the
    transaction holds the lock: no round trip. The memo is an on-commit marker registered with
    the event, so it lapses exactly when the event's row does (commit, rollback, or the
    rollback of a savepoint it was written in) and the next event reads the head again."""
    memo = getattr(connection, "_audit_head", None)
    if memo is not None:
        marker, seq, hash_ = memo
        if connection.in_atomic_block and any(
            entry[1] is marker for entry in connection.run_on_commit
        ):
            return seq, hash_
    return None


def _head_locked() -> tuple[int, str]:
    """Take the chain lock (held to the end of the transaction) and read the head."""
    memo = _head_memo()
    if memo is not None:
        return memo
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_PG_LOCK_AND_HEAD)
            cursor.nextset()
            row = cursor.fetchone()
        return (row[0], row[1]) if row else (0, GENESIS_HASH)
    return _head()


def _head_remember(seq: int, hash_: str) -> None:
    """The event just written is the head of this transaction's chain (see _head_locked)."""

    def marker() -> None:
        connection._audit_head = None

    transaction.on_commit(marker)
    connection._audit_head = (marker, seq, hash_)


def _head_forget() -> None:
    connection._audit_head = None


def event_record(
    *,
    action: str,
    actor: Any,
    run_id: Any = None,
    approval_id: int | None = None,
    tool: str = "",
    data: dict[str, Any] | None = None,
    private: Mapping[str, Any] | None = None,
    request: Any = None,
) -> AuditEvent:
    """Append one event to the chain, in the caller's transaction. ``private``: personal data,
    each value sealed under the run's data key and merged into ``data`` (audit.private)."""
    label, user_id, username = _actor_fields(actor)
    data = data_with_private(data, run_id=run_id, private=private)
    ip = None
    user_agent = ""
    if request is not None:
        ip = _ip_text(_client_address(request))
        # Postgres text refuses U+0000: replaced before hashing, so the hash covers what is kept.
        user_agent = request.META.get("HTTP_USER_AGENT", "").replace("\x00", "\ufffd")[:300]
    # Inside the caller's transaction (the usual case) no savepoint of its own: the event
    # stands or falls with the state change it records (invariant 3).
    block = contextlib.nullcontext() if connection.in_atomic_block else transaction.atomic()
    with block:
        memo = _head_memo()
        one_trip = memo is None and append.one_trip_supported()
        if one_trip:
            head_seq, prev_hash = 0, ""  # read and written by the INSERT itself
        else:
            head_seq, prev_hash = memo if memo is not None else _head_locked()
        event = AuditEvent(
            seq=head_seq + 1,
            at=timezone.now(),
            actor=label[:200],
            actor_user_id=user_id,
            actor_username=username[:150],
            action=action,
            run_id=uuid.UUID(str(run_id)) if run_id else None,
            approval_id=int(approval_id) if approval_id is not None else None,
            tool=tool or "",
            data=data,
            ip=ip,
            user_agent=user_agent,
            prev_hash=prev_hash,
            chain_version=CHAIN_VERSION,
        )
        event.canonical = record_text(event_row(event))
        # The jsonb holds the parsed text, so its values are the hashed ones (verify checks).
        event.data = canonical_parse(event.canonical)["data"]
        if one_trip:
            # The lock, the head and this event in one round trip (audit.append).
            prefix, suffix = append.text_split(event.canonical)
            append.event_insert_at_head(
                event, lock_key=_CHAIN_LOCK_KEY, genesis=GENESIS_HASH, prefix=prefix, suffix=suffix
            )
        else:
            event.hash = record_hash(prev_hash, event.canonical)
            event.save(force_insert=True)
        _head_remember(event.seq, event.hash)
    return event


def events_seed(
    *,
    count: int,
    action: str = "run.created",
    actor: str = "system:seed",
    tool: str = "",
    batch_size: int = 5000,
) -> int:
    """Append `count` synthetic events fast (COPY on Postgres, executemany on SQLite; the chain
    is computed here). Tests and benchmarks only: real events go through event_record().
    Returns the new head seq."""
    conn = connections[DEFAULT_DB_ALIAS]
    names = (*HASHED_FIELDS, "prev_hash", "hash", "chain_version", "canonical")
    table = conn.ops.quote_name(AuditEvent._meta.db_table)
    columns = ", ".join(conn.ops.quote_name(AuditEvent._meta.get_field(n).column) for n in names)
    postgres = conn.vendor == "postgresql"
    with transaction.atomic(), conn.cursor() as cursor:
        _lock_head()
        seq, prev_hash = _head()
        _head_forget()  # written here, not through event_record
        start = timezone.now()

        def rows():
            nonlocal seq, prev_hash
            for index in range(count):
                seq += 1
                row = {
                    "seq": seq,
                    "at": start + dt.timedelta(microseconds=index),
                    "actor": actor,
                    "actor_user_id": None,
                    "actor_username": "",
                    "action": action,
                    "run_id": uuid.uuid4(),
                    "approval_id": None,
                    "tool": tool,
                    "data": {"n": index, "note": "seeded event"},
                    "ip": None,
                    "user_agent": "",
                }
                text = record_text(hashed_row(row))
                row["prev_hash"] = prev_hash
                row["hash"] = prev_hash = record_hash(prev_hash, text)
                row["chain_version"], row["canonical"] = CHAIN_VERSION, text
                # The database forms Django would write for these fields.
                row["data"] = canonical_json(row["data"])
                if not postgres:
                    row["at"] = conn.ops.adapt_datetimefield_value(row["at"])
                    row["run_id"] = row["run_id"].hex
                yield [row[name] for name in names]

        if postgres:
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for values in rows():
                    copy.write_row(values)
        else:
            sql = f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(names))})"
            batch: list[list[Any]] = []
            for values in rows():
                batch.append(values)
                if len(batch) >= batch_size:
                    cursor.executemany(sql, batch)
                    batch = []
            if batch:
                cursor.executemany(sql, batch)
    return seq


# --- access ----------------------------------------------------------------------------------


def compliance_group_ensure(*, using: str = "default") -> Group:
    """The "compliance" group with audit.view_audit (also recreated after a test flush)."""
    content_type = ContentType.objects.db_manager(using).get_for_model(AuditEvent)
    permission, _ = Permission.objects.using(using).get_or_create(
        content_type=content_type,
        codename="view_audit",
        defaults={"name": "Can view and export the whole audit trail"},
    )
    group, _ = Group.objects.using(using).get_or_create(name=COMPLIANCE_GROUP)
    group.permissions.add(permission)
    return group
