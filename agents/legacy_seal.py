"""Sealing values written before personal data was sealed (``manage.py seal_existing``) and,
for erasure, sealing a legacy run's values before its key is destroyed.

A sealed column may still hold plaintext written by an older version: reads return it as is.
These functions find such values (the stored text is not an envelope) and rewrite them sealed
under their run's key. ``Effect.args`` is an identity column of the append-only ledger
(agents/migrations/_append_only.py): its trigger is lifted inside the caller's transaction and
put back before it commits (Postgres: ``DISABLE TRIGGER`` holds an ACCESS EXCLUSIVE lock on the
ledger until commit, so batches stay small). ``args_fingerprint`` stays the sha256 of the
plaintext, so a retry of the same call still matches its claim.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.db import connection, models, transaction
from django.db.models.functions import Cast

from agents.migrations import _append_only
from core.sealed_fields import SealedJSONField, SealedTextField, field_seal
from core.sealing import MARKER, is_envelope

# (model label, lookup from the row to its run id)
SEALED_MODELS = (
    ("approvals.AgentRun", "id"),
    ("approvals.ApprovalRequest", "run_id"),
    ("approvals.ApprovalVote", "approval__run_id"),
    ("agents.Effect", "run_id"),
)


@dataclass
class Legacy:
    model: type[models.Model]
    pk: Any
    run_id: Any
    values: dict[str, Any]


def sealed_fields(model: type[models.Model]) -> list[models.Field]:
    return [
        f for f in model._meta.concrete_fields if isinstance(f, (SealedJSONField, SealedTextField))
    ]


def _plaintext(field: models.Field, raw: str | None) -> tuple[bool, Any]:
    """(is legacy plaintext, its value) from the column's stored text."""
    if raw is None or raw == "":
        return False, None
    if isinstance(field, SealedTextField):
        if raw.startswith('{"' + MARKER):
            with contextlib.suppress(ValueError):
                if is_envelope(json.loads(raw)):
                    return False, None
        return True, raw
    value = json.loads(raw)
    return (not is_envelope(value)), value


def _legacy(model: type[models.Model], run_path: str, rows: models.QuerySet) -> Iterator[Legacy]:
    fields = sealed_fields(model)
    raw = {f"raw_{f.name}": Cast(f.name, models.TextField()) for f in fields}
    for row in rows.annotate(**raw).values("pk", run_path, *raw):
        found = {}
        for f in fields:
            legacy, value = _plaintext(f, row[f"raw_{f.name}"])
            if legacy:
                found[f.name] = value
        if found:
            yield Legacy(model, row["pk"], row[run_path], found)


@contextlib.contextmanager
def _ledger_identity_unlocked() -> Iterator[None]:
    """Lets this transaction rewrite ``Effect.args`` (the caller's atomic block restores the
    trigger on rollback; it is put back here before commit)."""
    assert connection.in_atomic_block, "lift the ledger trigger only inside a transaction"
    table = _append_only.TABLE
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute(
                f"ALTER TABLE {table} DISABLE TRIGGER effect_no_delete_no_identity_change"
            )
        else:
            cursor.execute("DROP TRIGGER IF EXISTS effect_no_identity_change")
    yield
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"ALTER TABLE {table} ENABLE TRIGGER effect_no_delete_no_identity_change"
            )
        else:
            cursor.execute(_append_only.SQLITE_INSTALL[0])


def _write(found: list[Legacy]) -> int:
    effect_args = [
        item
        for item in found
        if item.model._meta.label == "agents.Effect" and "args" in item.values
    ]
    unlock = _ledger_identity_unlocked() if effect_args else contextlib.nullcontext()
    with unlock:
        for item in found:
            sealed = {
                name: field_seal(item.model, name, item.run_id, value)
                for name, value in item.values.items()
            }
            item.model.objects.filter(pk=item.pk).update(**sealed)
    return sum(len(item.values) for item in found)


def runs_reseal(run_ids: Iterable[Any]) -> int:
    """Seal every legacy value of these runs, in the caller's transaction (erasure calls it
    before destroying their keys). Returns the values sealed."""
    ids = list(run_ids)
    found: list[Legacy] = []
    for label, run_path in SEALED_MODELS:
        model = apps.get_model(label)
        found.extend(_legacy(model, run_path, model.objects.filter(**{f"{run_path}__in": ids})))
    if not found:
        return 0
    with transaction.atomic():
        return _write(found)


def legacy_batch(
    label: str, *, after: Any = None, size: int = 500, write: bool = True
) -> tuple[int, int, Any]:
    """One batch of ``label``'s rows in pk order after ``after``: (rows read, values sealed or
    found, last pk read; None when the table is done)."""
    run_path = dict(SEALED_MODELS)[label]
    model = apps.get_model(label)
    rows = model.objects.order_by("pk")
    if after is not None:
        rows = rows.filter(pk__gt=after)
    page = list(rows.values_list("pk", flat=True)[:size])
    if not page:
        return 0, 0, None
    found = list(_legacy(model, run_path, model.objects.filter(pk__in=page)))
    if not write:
        return len(page), sum(len(item.values) for item in found), page[-1]
    with transaction.atomic():
        sealed = _write(found) if found else 0
    return len(page), sealed, page[-1]


# The audit data keys that carry run data (audit ``private=`` at every call site since sealing).
PERSONAL_AUDIT_KEYS = frozenset(
    {"input", "output", "error", "traceback", "update", "payload", "args", "message", "note"}
    | {"shown", "proposed_args", "final_args", "diff", "result"}
)


def legacy_audit_events(run_ids: Iterable[Any]) -> int:
    """The runs' audit events written before sealing that hold run data in plaintext: they are
    append-only and hashed, so erasure cannot reach them (it reports how many)."""
    from audit.models import AuditEvent

    count = 0
    for data in AuditEvent.objects.filter(run_id__in=list(run_ids)).values_list("data", flat=True):
        if any(
            key in PERSONAL_AUDIT_KEYS and not is_envelope(value)
            for key, value in (data or {}).items()
        ):
            count += 1
    return count
