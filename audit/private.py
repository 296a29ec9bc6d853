"""Personal data inside audit events, sealed per key under the run's data key (core.sealing).

``event_record(..., private={"input": value})`` stores ``{"input": {"$sealed": token}}`` in
``data``: the token seals the RFC 8785 text of the value (label ``audit.input``), so opening
gives exactly what an unsealed event would have recorded, and ``CanonicalError`` still
refuses what JCS cannot write. The envelope is a plain JSON object of one string, so the
chain hashes the ciphertext, and verification and exports need no key (their fast paths
included). Erasure destroys the run's key: the chain still verifies, the value reads "erased".

Envelopes are opened only where audit puts them: a top-level key of ``data`` whose token names
the event's own run. Anything else (a look-alike inside a value, a token of another run, one
that does not open under its key's label) is shown as it is stored.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from audit.canonical import CanonicalError, canonical_parse, canonical_text
from core.keyring import SealedValueError
from core.sealing import (
    ERASED_LABEL,
    MARKER,
    datakey_scope,
    datakeys_prefetch,
    is_envelope,
    token_open,
    token_run_id,
    token_seal,
)


def private_label(key: str) -> str:
    """The AAD of a sealed audit key: a ciphertext moved to another key does not open."""
    return f"audit.{key}"


def data_with_private(
    data: Mapping[str, Any] | None, *, run_id: Any, private: Mapping[str, Any] | None
) -> dict[str, Any]:
    """``data`` with each ``private`` value sealed under the run's key and merged in."""
    merged = dict(data or {})
    if private is None:
        return merged
    if not run_id:
        raise TypeError("private audit data needs the run_id whose data key seals it")
    clash = sorted(set(merged) & set(private))
    if clash:
        raise ValueError(f"audit keys both in data and private: {', '.join(clash)}")
    with datakey_scope():  # one key read for all of an event's values
        for key, value in private.items():
            if type(key) is not str:
                raise TypeError(f"private audit keys are strings, not {type(key).__name__}")
            try:
                plaintext = canonical_text(value).encode("utf-8")
            except CanonicalError:
                canonical_text({"data": {key: value}})  # the same refusal, its path from data
                raise
            # An exact dict: canonical_text's orjson fast path takes exact types only.
            merged[key] = {MARKER: token_seal(run_id, plaintext, label=private_label(key))}
    return merged


def _own_token(value: Any, run_id: uuid.UUID | None) -> str | None:
    """The token of an envelope sealed for ``run_id``, or None."""
    if run_id is None or not is_envelope(value):
        return None
    token = value[MARKER]
    try:
        return token if token_run_id(token) == run_id else None
    except SealedValueError:
        return None


def _run_uuid(run_id: Any) -> uuid.UUID | None:
    if not run_id:
        return None
    return run_id if isinstance(run_id, uuid.UUID) else uuid.UUID(str(run_id))


def data_open(data: Any, *, run_id: Any) -> Any:
    """``data`` with its sealed keys opened, or "erased" where the run's key is destroyed."""
    run = _run_uuid(run_id)
    if run is None or not isinstance(data, dict):
        return data
    opened: dict[str, Any] = {}
    for key, value in data.items():
        token = _own_token(value, run)
        if token is None:
            opened[key] = value
            continue
        try:
            plain = token_open(token, label=private_label(key))
        except SealedValueError:  # altered, or moved from another key: shown as stored
            opened[key] = value
            continue
        opened[key] = ERASED_LABEL if plain is None else canonical_parse(plain.decode("utf-8"))
    return opened


def data_runs_sealed(items: Iterable[tuple[Any, Any]]) -> set[uuid.UUID]:
    """The runs whose keys opening these (run_id, data) pairs needs."""
    runs: set[uuid.UUID] = set()
    for run_id, data in items:
        run = _run_uuid(run_id)
        if isinstance(data, dict) and any(_own_token(value, run) for value in data.values()):
            runs.add(run)
    return runs


def event_data_open(event: Any) -> Any:
    """One event's ``data`` as a reader sees it (sealed keys opened, or "erased")."""
    return data_open(event.data, run_id=event.run_id)


def events_data_open(events: Iterable[Any]) -> list[Any]:
    """``event_data_open`` of each event, the runs' keys read in one query first (inside a
    key scope: a request's, a task's, or one opened here for the call)."""
    events = list(events)
    with datakey_scope():
        datakeys_prefetch(data_runs_sealed((event.run_id, event.data) for event in events))
        return [event_data_open(event) for event in events]
