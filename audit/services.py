"""Writing to the audit trail. Call event_record() inside the transaction that changes state."""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from audit.canonical import canonical_json, sha256_hex
from audit.models import AuditEvent

GENESIS_HASH = "0" * 64
# Any constant works; it names the one advisory lock that serialises the chain head.
_CHAIN_LOCK_KEY = 727_001


def _actor_fields(actor: Any) -> tuple[str, int | None, str]:
    """(actor label, user id, username snapshot) for a user object or a 'system:'/'agent:' label."""
    if actor is None:
        return "system:unknown", None, ""
    if isinstance(actor, str):
        return actor, None, ""
    username = actor.get_username()
    return f"user:{actor.pk}", actor.pk, username


def event_hash(prev_hash: str, row: dict[str, Any]) -> str:
    """sha256(prev_hash + canonical JSON of the row)."""
    return sha256_hex(prev_hash + canonical_json(row))


def event_row(event: AuditEvent) -> dict[str, Any]:
    """The fields that the hash covers, in their canonical form."""
    return {
        "seq": event.seq,
        "at": event.at.isoformat(),
        "actor": event.actor,
        "actor_user_id": event.actor_user_id,
        "actor_username": event.actor_username,
        "action": event.action,
        "run_id": str(event.run_id) if event.run_id else None,
        "approval_id": event.approval_id,
        "tool": event.tool,
        "data": event.data,
        "ip": event.ip,
        "user_agent": event.user_agent,
    }


def _lock_head() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CHAIN_LOCK_KEY])
    # SQLite: transactions are BEGIN IMMEDIATE (settings), so writers are already serialised.


def event_record(
    *,
    action: str,
    actor: Any,
    run_id: Any = None,
    approval_id: int | None = None,
    tool: str = "",
    data: dict[str, Any] | None = None,
    request: Any = None,
) -> AuditEvent:
    """Append one event to the chain, in the caller's transaction."""
    label, user_id, username = _actor_fields(actor)
    ip = None
    user_agent = ""
    if request is not None:
        ip = request.META.get("REMOTE_ADDR") or None
        user_agent = request.META.get("HTTP_USER_AGENT", "")[:300]
    with transaction.atomic():
        _lock_head()
        head = AuditEvent.objects.order_by("-seq").only("seq", "hash").first()
        prev_hash = head.hash if head else GENESIS_HASH
        event = AuditEvent(
            seq=(head.seq + 1) if head else 1,
            at=timezone.now(),
            actor=label,
            actor_user_id=user_id,
            actor_username=username,
            action=action,
            run_id=run_id,
            approval_id=approval_id,
            tool=tool,
            data=data or {},
            ip=ip,
            user_agent=user_agent,
            prev_hash=prev_hash,
        )
        # JSON round trip so the hash covers exactly what the database will give back.
        event.data = _json_roundtrip(event.data)
        event.hash = event_hash(prev_hash, event_row(event))
        event.save(force_insert=True)
    return event


def _json_roundtrip(value: dict[str, Any]) -> dict[str, Any]:
    import json

    return json.loads(canonical_json(value))
