"""Checkpoints encrypted at rest: LangGraph's EncryptedSerializer over the master key ring.

Every value a saver stores goes through ``checkpoint_serde()``: msgpack, then AES-256-GCM under
the ring's current key (``core.keyring``, ``ENCRYPTION_KEYS``). The sealed bytes carry the key
id and the type column names it too (``msgpack+aesgcm.k2``), so a rotation ("k2,k1") reads what
k1 sealed and an operator can count, in SQL, what is still under an old key.

Two things LangGraph's savers store outside the serde, closed here (``runtime.fenced_saver``):

- **Primitive channel values.** PostgresSaver keeps top-level ``str``/``int``/``float``/``bool``
  values inline in the ``checkpoints.checkpoint`` JSONB. Our Postgres savers send every value
  to ``checkpoint_blobs`` (``SealedPostgres.put``). SqliteSaver serialises the whole
  checkpoint through the serde already.
- **Metadata**, JSON on both databases: LangGraph copies ``config["metadata"]`` and every
  primitive ``configurable`` value into it. Only the keys in ``PLAIN_METADATA`` stay readable
  (the loop's own bookkeeping, our graph version, run id and lease epoch, which SQL reads); the
  rest is sealed into one ``"__sealed__"`` key and opened on read.

Rows written before (plaintext) stay readable: a type without ``+`` is not decrypted, inline
values are merged as PostgresSaver merges them, metadata without ``"__sealed__"`` is used as it is.
"""

from __future__ import annotations

import base64
import json
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple, get_checkpoint_metadata
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from psycopg.types.json import Jsonb

from core.keyring import VARIABLE, KeyMissingError, SealedValueError, keyring_get, sealed_parts

CIPHER = "aesgcm"
# Binds a sealed value to its use: a value sealed by another part of the console under the
# same ring does not open as a checkpoint (nor a checkpoint value as metadata).
VALUE_AAD = b"langgraph-checkpoint-value"
METADATA_AAD = b"langgraph-checkpoint-metadata"
# The key the sealed metadata is stored under. LangGraph never copies a config key starting
# with "__" into the metadata, so no agent's own key (``sealed``, say) can be taken for it,
# whether in a row written before encryption or opened from the sealed part.
SEALED = "__sealed__"
# Metadata keys that stay plaintext: LangGraph's loop (source, step, parents, delta counters
# that its prune reads in SQL), and ours (the version a thread resumes under, the run, the lease
# epoch the fence reads in SQL). None of them holds state.
PLAIN_METADATA = frozenset(
    {
        "source",
        "step",
        "parents",
        "counters_since_delta_snapshot",
        "delta_writes_versioned",
        "graph_version",
        "run_id",
        "lease_epoch",
    }
)


# Not ApplicationErrors: no request can fix them, and no HTTP status may make them look
# retryable (agents.runtime.failures reads one). Only an operator can, so an advance that meets
# one goes to the failure path at once and a person sees the message.
class CheckpointKeyMissing(KeyMissingError):
    """A checkpoint was sealed under a key the ring no longer holds."""


class CheckpointUnreadable(SealedValueError):
    """A sealed checkpoint value does not open: altered, or another key under the same id."""


def _open(sealed: bytes, *, aad: bytes) -> bytes:
    try:
        return keyring_get().open(sealed, aad=aad)
    except KeyMissingError:
        kid = sealed_parts(sealed)[0]
        raise CheckpointKeyMissing(
            f"checkpoint data is encrypted under key {kid!r}, which {VARIABLE} no longer "
            f"holds: put key {kid!r} back into {VARIABLE} (after the current key); "
            "docs/operations.md, 'Encryption at rest'"
        ) from None
    except ValueError as exc:  # SealedValueError, or a key id that is not even text
        raise CheckpointUnreadable(
            f"a checkpoint value does not open ({exc}); check that each id in {VARIABLE} "
            "still names the same key"
        ) from None


class KeyRingCipher:
    """LangGraph's ``CipherProtocol`` on the master key ring; the cipher name carries the key id."""

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        ring = keyring_get()
        return f"{CIPHER}.{ring.current}", ring.seal(plaintext, aad=VALUE_AAD)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        if ciphername.partition(".")[0] != CIPHER:
            raise CheckpointUnreadable(f"unknown checkpoint cipher {ciphername!r}")
        return _open(ciphertext, aad=VALUE_AAD)


def checkpoint_serde() -> EncryptedSerializer:
    """The serde of every saver: LangGraph's default serialisation, sealed by the key ring."""
    return EncryptedSerializer(KeyRingCipher(), JsonPlusSerializer())


# --- metadata ----------------------------------------------------------------------------------


def metadata_seal(config: Mapping[str, Any], metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata a saver stores for ``config``: what LangGraph would store, with every key
    outside ``PLAIN_METADATA`` sealed into one. ``writes`` is dropped, as PostgresSaver does."""
    full = dict(get_checkpoint_metadata(config, metadata))  # type: ignore[arg-type]
    full.pop("writes", None)
    plain = {k: v for k, v in full.items() if k in PLAIN_METADATA}
    rest = {k: v for k, v in full.items() if k not in PLAIN_METADATA}
    if rest:
        ring = keyring_get()
        sealed = ring.seal(json.dumps(rest, ensure_ascii=False).encode(), aad=METADATA_AAD)
        # The key id in front, for SQL (docs/operations.md); the sealed bytes carry it too.
        plain[SEALED] = f"{ring.current}:{base64.b64encode(sealed).decode()}"
    return plain


def metadata_open(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """Stored metadata with its sealed keys opened (plaintext metadata is returned as it is)."""
    out = dict(metadata or {})
    sealed = out.pop(SEALED, None)
    if isinstance(sealed, str):
        try:
            raw = base64.b64decode(sealed.partition(":")[2], validate=True)
        except ValueError:  # binascii.Error
            raise CheckpointUnreadable("the sealed checkpoint metadata is not base64") from None
        out.update(json.loads(_open(raw, aad=METADATA_AAD)))
    return out


def bare_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` without what LangGraph would copy into the metadata (already sealed)."""
    conf = config["configurable"]
    keep = ("thread_id", "checkpoint_ns", "checkpoint_id")
    return {"configurable": {k: conf[k] for k in keep if k in conf}}


def filter_split(
    filter: dict[str, Any] | None,  # noqa: A002 - the savers' own name
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(what SQL can filter on, what must be filtered after the metadata is opened)."""
    if not filter:
        return filter, {}
    plain = {k: v for k, v in filter.items() if k in PLAIN_METADATA}
    return plain or None, {k: v for k, v in filter.items() if k not in PLAIN_METADATA}


def _contains(value: Any, wanted: Any) -> bool:
    """JSONB ``@>`` on decoded values: dicts by subset, anything else by equality."""
    if isinstance(wanted, dict):
        return isinstance(value, dict) and all(
            k in value and _contains(value[k], v) for k, v in wanted.items()
        )
    return value == wanted


def tuples_opened(
    tuples: Iterator[CheckpointTuple], sealed_filter: dict[str, Any], limit: int | None
) -> Iterator[CheckpointTuple]:
    """Tuples with opened metadata, filtered on the sealed keys, up to ``limit``."""
    shown = 0
    for tup in tuples:
        metadata = metadata_open(tup.metadata)
        if not all(k in metadata and _contains(metadata[k], v) for k, v in sealed_filter.items()):
            continue
        yield tup._replace(metadata=metadata)
        shown += 1
        if limit is not None and shown >= limit:
            return


# --- the savers' mixins (runtime.fenced_saver) ------------------------------------------------


class SealedAtRest:
    """The encrypted serde by default; metadata filters on sealed keys applied after opening."""

    def __init__(self, *args: Any, serde: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, serde=serde or checkpoint_serde(), **kwargs)  # type: ignore[call-arg]

    def list(
        self,
        config: Any,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 - the savers' own signature
        before: Any = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        plain, sealed = filter_split(filter)
        tuples = super().list(  # type: ignore[misc]
            config, filter=plain, before=before, limit=None if sealed else limit
        )
        yield from tuples_opened(tuples, sealed, limit)


def _inlined_by_stock(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


# Checkpoints this process wrote with every channel value in a blob, by (thread, ns, id): a
# child of one needs no blob for its unchanged values. Bounded; forgetting one costs a re-seal.
_COMPLETE_MAX = 10_000


class SealedPostgres(SealedAtRest):
    """PostgresSaver storing no channel value inline and sealing its metadata."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._complete: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        self._complete_lock = threading.Lock()

    def _parent_complete(self, key: tuple[str, str, str]) -> bool:
        with self._complete_lock:
            return key in self._complete

    def _mark_complete(self, key: tuple[str, str, str]) -> None:
        with self._complete_lock:
            self._complete[key] = None
            if len(self._complete) > _COMPLETE_MAX:
                self._complete.popitem(last=False)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        """PostgresSaver.put, less its inline values: every channel value goes to
        ``checkpoint_blobs`` through the serde; the metadata is sealed (``metadata_seal``)."""
        conf = config["configurable"]
        thread_id, ns = conf["thread_id"], conf["checkpoint_ns"]
        values = checkpoint["channel_values"]
        # A DeltaChannel snapshot keeps PostgresSaver's marker (its prune looks for it).
        inline = {k: True for k, v in values.items() if isinstance(v, _DeltaSnapshot)}
        versions = {k: v for k, v in new_versions.items() if k in values}
        current = checkpoint["channel_versions"]
        parent = conf.get("checkpoint_id")
        if not (parent and self._parent_complete((thread_id, ns, parent))):
            # The parent may be PostgresSaver's, which kept unchanged primitive values inline,
            # so it may have no blob at this version: write one (a no-op where it exists).
            # A parent this process wrote has them all (unchanged since, or written by it).
            for k, v in values.items():
                if k not in versions and _inlined_by_stock(v) and k in current:
                    versions[k] = current[k]
        with self._cursor(pipeline=True) as cur:  # type: ignore[attr-defined]
            if versions:
                cur.executemany(
                    self.UPSERT_CHECKPOINT_BLOBS_SQL,  # type: ignore[attr-defined]
                    self._dump_blobs(thread_id, ns, values, versions),  # type: ignore[attr-defined]
                )
            cur.execute(
                self.UPSERT_CHECKPOINTS_SQL,  # type: ignore[attr-defined]
                (
                    thread_id,
                    ns,
                    checkpoint["id"],
                    conf.get("checkpoint_id"),
                    Jsonb({**checkpoint, "channel_values": inline}),
                    Jsonb(metadata_seal(config, metadata)),
                ),
            )
        self._mark_complete((thread_id, ns, checkpoint["id"]))
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    def _load_checkpoint_tuple(self, value: Any) -> CheckpointTuple:
        tup = super()._load_checkpoint_tuple(value)  # type: ignore[misc]
        return tup._replace(metadata=metadata_open(tup.metadata))


class SealedSqlite(SealedAtRest):
    """SqliteSaver (whose checkpoint goes through the serde whole) sealing its metadata."""

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        sealed = metadata_seal(config, metadata)
        return super().put(bare_config(config), checkpoint, sealed, new_versions)  # type: ignore[misc]

    def get_tuple(self, config: Any) -> CheckpointTuple | None:
        tup = super().get_tuple(config)  # type: ignore[misc]
        return tup._replace(metadata=metadata_open(tup.metadata)) if tup else None
