"""Envelope encryption of personal data under a per-run data key.

Each run has a random AES-256 data key (``core.models.DataKey``), stored wrapped by the master
key ring (core/keyring.py). A value is sealed under its run's data key and stored as a one-key
JSON object, the same in a JSON column, inside audit ``data`` and as the text of a text column::

    {"$sealed": "v1.<run id, 32 hex>.<base64url(nonce 12 | AES-256-GCM ciphertext | tag 16)>"}

The run id inside makes a value self-describing; the AAD is a label naming where the value
lives (``approvals.AgentRun.input``, ``audit.input``), so a ciphertext moved to another column
does not open, and one moved to another run does not open either (another key).

Erasure destroys a run's data key (a tombstone row): its values then read as ``ERASED`` (an
empty, falsy ``dict`` or ``str``), while a *missing* key row raises ``DataKeyMissing``.

Unwrapped keys are cached per request and per task only (``datakey_scope``): an erasure in one
process takes effect in the others at their next request or task. Outside a scope every value
reads its key from the database.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import json
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.db import connection, transaction
from django.utils import timezone

from core.keyring import KeyMissingError, SealedValueError, keyring_get
from core.sealed_values import (  # noqa: F401  (re-exported: the API of sealing)
    ERASED_LABEL,
    UNREADABLE_LABEL,
    DataKeyMissing,
    DataKeyUnreadable,
    ErasedDict,
    ErasedText,
    KeyDestroyedError,
    PlaintextRefused,
    Sealed,
    SealedText,
    UnreadableDict,
    UnreadableText,
    is_erased,
    sealed_label,
)

MARKER = "$sealed"
_VERSION = "v1"
_NONCE = 12
_DESTROYED = object()  # a cached tombstone
_scope: ContextVar[dict[uuid.UUID, Any] | None] = ContextVar("datakey_scope", default=None)

F = TypeVar("F", bound=Callable[..., Any])


class _Unreadable:
    def __init__(self, reason: str) -> None:
        self.reason = reason


def is_envelope(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(MARKER), str)


# --- keys ------------------------------------------------------------------------------------


def _aad(run_id: uuid.UUID) -> bytes:
    return b"datakey:" + run_id.bytes


def _uuid(run_id: Any) -> uuid.UUID:
    return run_id if isinstance(run_id, uuid.UUID) else uuid.UUID(str(run_id))


class _Tentative:
    """A key inserted by a transaction still open: valid while its on-commit marker is queued
    (the marker leaves the queue when the insert's transaction or savepoint rolls back)."""

    def __init__(self, key: AESGCM, cache: dict[uuid.UUID, Any], run_id: uuid.UUID) -> None:
        self.key = key

        def marker() -> None:  # on commit: the key is for good
            if cache.get(run_id) is self:
                cache[run_id] = key

        self.marker = marker

    def alive(self) -> bool:
        return connection.in_atomic_block and any(
            entry[1] is self.marker for entry in connection.run_on_commit
        )


def _remember(run_id: uuid.UUID, key: Any) -> None:
    cache = _scope.get()
    if cache is not None:
        cache[run_id] = key


def _remember_new(run_id: uuid.UUID, key: AESGCM) -> None:
    """A key this connection just inserted: cached for good once its transaction commits, never
    beyond a rollback (a value sealed under a rolled-back key could never be opened)."""
    cache = _scope.get()
    if cache is None:
        return
    if not connection.in_atomic_block:
        cache[run_id] = key
        return
    tentative = _Tentative(key, cache, run_id)
    cache[run_id] = tentative
    transaction.on_commit(tentative.marker)


def _cached(run_id: uuid.UUID) -> Any:
    """The scope's entry for the run (None when none or when a rollback voided it)."""
    cache = _scope.get()
    if cache is None:
        return None
    entry = cache.get(run_id)
    if isinstance(entry, _Tentative):
        if entry.alive():
            return entry.key
        del cache[run_id]
        return None
    return entry


def _from_row(run_id: uuid.UUID, wrapped: Any, destroyed_at: Any) -> Any:
    if destroyed_at is not None or wrapped is None:
        return _DESTROYED
    try:
        return AESGCM(keyring_get().open(bytes(wrapped), aad=_aad(run_id)))
    except (KeyMissingError, SealedValueError) as exc:
        return _Unreadable(f"the run's data key does not open ({exc})")


def _read(run_id: uuid.UUID) -> Any:
    """The run's cipher, ``_DESTROYED``, or None when it has no key row."""
    from core.models import DataKey

    cached = _cached(run_id)
    if cached is not None:
        return cached
    row = DataKey.objects.filter(run_id=run_id).values_list("wrapped", "destroyed_at").first()
    if row is None:
        return None
    key = _from_row(run_id, *row)
    _remember(run_id, key)
    return key


def _insert(run_id: uuid.UUID) -> AESGCM | None:
    """A new key for the run, or None when another writer made one first."""
    from core.models import DataKey

    dek = AESGCM.generate_key(bit_length=256)
    wrapped = keyring_get().seal(dek, aad=_aad(run_id))
    table = DataKey._meta.db_table
    pk = DataKey._meta.pk.get_db_prep_value(run_id, connection)
    created = DataKey._meta.get_field("created_at").get_db_prep_value(timezone.now(), connection)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (run_id, wrapped, created_at, destroyed_at) "  # noqa: S608
            "VALUES (%s, %s, %s, NULL) ON CONFLICT (run_id) DO NOTHING RETURNING run_id",
            [pk, wrapped, created],
        )
        inserted = cursor.fetchone() is not None
    if not inserted:
        return None
    key = AESGCM(dek)
    _remember_new(run_id, key)
    return key


def _key_for_seal(run_id: uuid.UUID, *, fresh: bool = False) -> AESGCM:
    """The run's cipher for a write; made on first use (a run's first sealed value). ``fresh``
    (a new run): insert first, unless the scope already holds the key (a second sealed field)."""
    key = _cached(run_id) if fresh else _read(run_id)
    if key is None:
        key = _insert(run_id) or _read(run_id)
    if key is _DESTROYED:
        raise KeyDestroyedError(f"run {run_id} was erased: nothing new is written for it")
    if isinstance(key, _Unreadable):
        raise DataKeyUnreadable(f"run {run_id}: {key.reason}")
    if key is None:  # pragma: no cover - the insert lost to a row that then vanished
        raise DataKeyMissing(f"no data key for run {run_id}")
    return key


def datakey_create(run_id: Any) -> None:
    """Make the run's data key now (a new run); harmless when it already has one."""
    _key_for_seal(_uuid(run_id), fresh=True)


def datakeys_prefetch(run_ids: Iterable[Any]) -> None:
    """Read the keys of many runs in one query into the current scope (no scope: no-op)."""
    from core.models import DataKey

    cache = _scope.get()
    if cache is None:
        return
    wanted = {r for r in (_uuid(r) for r in run_ids if r) if _cached(r) is None}
    if not wanted:
        return
    rows = DataKey.objects.filter(run_id__in=wanted).values_list(
        "run_id", "wrapped", "destroyed_at"
    )
    for run_id, wrapped, destroyed_at in rows:
        cache[run_id] = _from_row(run_id, wrapped, destroyed_at)


def datakeys_destroy(run_ids: Iterable[Any]) -> int:
    """Destroy the runs' data keys (erasure only): tombstones, also for runs that had none, so
    nothing can be sealed for them afterwards. Returns the keys destroyed by this call."""
    from core.models import DataKey

    ids = {_uuid(r) for r in run_ids}
    now = timezone.now()
    destroyed = DataKey.objects.filter(run_id__in=ids, destroyed_at__isnull=True).update(
        wrapped=None, destroyed_at=now
    )
    have = set(DataKey.objects.filter(run_id__in=ids).values_list("run_id", flat=True))
    DataKey.objects.bulk_create(
        [DataKey(run_id=r, wrapped=None, destroyed_at=now) for r in ids - have],
        ignore_conflicts=True,
    )
    for run_id in ids:
        _remember(run_id, _DESTROYED)
    return destroyed


@contextlib.contextmanager
def datakey_scope() -> Iterator[None]:
    """Cache unwrapped keys until the block ends (one request, one task). Inside another
    scope, the outer one's cache is used (it ends with the outer block)."""
    if _scope.get() is not None:
        yield
        return
    token = _scope.set({})
    try:
        yield
    finally:
        _scope.reset(token)


def scoped(fn: F) -> F:
    """A task function whose reads share one key cache."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with datakey_scope():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


# --- values ----------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def token_seal(run_id: Any, plaintext: bytes, *, label: str, fresh: bool = False) -> str:
    """The envelope's token for ``plaintext`` under the run's key."""
    run = _uuid(run_id)
    nonce = os.urandom(_NONCE)
    body = _key_for_seal(run, fresh=fresh).encrypt(nonce, plaintext, label.encode())
    return f"{_VERSION}.{run.hex}.{_b64(nonce + body)}"


def token_run_id(token: str) -> uuid.UUID:
    version, _, rest = token.partition(".")
    run_hex, _, _ = rest.partition(".")
    if version != _VERSION:
        raise SealedValueError(f"unknown sealed value version {version!r}")
    try:
        return uuid.UUID(hex=run_hex)
    except ValueError:
        raise SealedValueError("sealed value names no run") from None


def token_open(token: str, *, label: str) -> bytes | None:
    """The plaintext, or None when the run's key was destroyed."""
    run = token_run_id(token)
    try:
        raw = _unb64(token.split(".", 2)[2])
    except (binascii.Error, ValueError, IndexError):
        raise SealedValueError("sealed value is not base64url") from None
    if len(raw) < _NONCE + 16:
        raise SealedValueError("sealed value too short")
    key = _read(run)
    if key is None:
        raise DataKeyMissing(f"no data key for run {run}: the sealed value cannot be read")
    if key is _DESTROYED:
        return None
    if isinstance(key, _Unreadable):
        raise DataKeyUnreadable(key.reason)
    try:
        return key.decrypt(raw[:_NONCE], raw[_NONCE:], label.encode())
    except Exception as exc:  # cryptography's InvalidTag
        raise SealedValueError(f"a sealed {label} does not open: altered or moved") from exc


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def seal(run_id: Any, value: Any, *, label: str, fresh: bool = False) -> Sealed:
    """A JSON value sealed under the run's key, for a sealed JSON column."""
    return Sealed({MARKER: token_seal(run_id, _dumps(value), label=label, fresh=fresh)})


def unseal(envelope: dict[str, Any], *, label: str) -> Any:
    """The JSON value of an envelope, or an ``ErasedDict``."""
    try:
        plain = token_open(envelope[MARKER], label=label)
    except (SealedValueError, DataKeyMissing) as exc:  # a lost master key, an altered value
        return UnreadableDict(Sealed(envelope), str(exc))
    if plain is None:
        return ErasedDict(Sealed(envelope))
    return json.loads(plain)


def seal_text(run_id: Any, text: str, *, label: str, fresh: bool = False) -> SealedText:
    """Text sealed under the run's key, for a sealed text column; ``""`` stays ``""``."""
    if text == "":
        return SealedText("")
    token = token_seal(run_id, text.encode(), label=label, fresh=fresh)
    return SealedText(json.dumps({MARKER: token}, separators=(",", ":")))


def unseal_text(stored: str, *, label: str) -> str:
    """The text of a sealed text column's value (legacy plaintext as is), or ``ErasedText``."""
    if not stored.startswith('{"' + MARKER):
        return stored
    try:
        envelope = json.loads(stored)
    except ValueError:
        return stored
    if not is_envelope(envelope):
        return stored
    try:
        plain = token_open(envelope[MARKER], label=label)
    except (SealedValueError, DataKeyMissing) as exc:
        return UnreadableText(SealedText(stored), str(exc))
    if plain is None:
        return ErasedText(SealedText(stored))
    return plain.decode()
