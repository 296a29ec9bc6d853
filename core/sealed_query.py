"""Querysets that open their rows' sealed values after one key query (core/sealing.py).

A sealed value opens with its run's data key. Opened row by row, a list of rows from many runs
costs one key query per run (outside a scope, one per value). ``SealedQuerySet`` (the manager of
the models with sealed fields) reads the page first with its sealed values left closed, reads
the keys of every run they name in one query (``datakeys_prefetch``), then opens them: a list
costs one key query, however many rows and runs it holds, and none when the scope already holds
the keys. The rows of ``select_related`` models are opened the same way.

Inside a request or a task the keys stay in its scope; elsewhere (a shell, a test) the list
opens under a scope of its own that ends with the list.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from django.db import models
from django.db.models.query import ModelIterable

from core.keyring import SealedValueError
from core.sealing import MARKER, datakey_scope, datakeys_prefetch, token_run_id

# While a list reads its rows, the sealed values it met (closed), else None (open at once).
_closed: ContextVar[list[Closed] | None] = ContextVar("sealed_closed", default=None)


class Closed:
    """A sealed value read but not opened yet: opened once its run's key is at hand."""

    __slots__ = ("stored", "label", "opener")

    def __init__(self, stored: Any, label: str, opener: Callable[..., Any]) -> None:
        self.stored, self.label, self.opener = stored, label, opener

    def run_id(self) -> Any:
        envelope = self.stored
        if isinstance(envelope, str):
            try:
                envelope = json.loads(envelope)
            except ValueError:
                return None
        try:
            return token_run_id(envelope[MARKER])
        except (SealedValueError, KeyError, TypeError):
            return None  # it raises where it opens, as any altered value does

    def open(self) -> Any:
        return self.opener(self.stored, label=self.label)


def open_or_close(stored: Any, *, label: str, opener: Callable[..., Any]) -> Any:
    """``opener(stored)`` now, or a ``Closed`` when a list will open it after its key query."""
    closed = _closed.get()
    if closed is None:
        return opener(stored, label=label)
    value = Closed(stored, label, opener)
    closed.append(value)
    return value


def _open_instance(obj: models.Model, seen: set[int] | None = None) -> None:
    # A reverse one-to-one (select_related("outcome")) caches each side on the other: each
    # instance is opened once.
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    for name, value in list(vars(obj).items()):
        if isinstance(value, Closed):
            vars(obj)[name] = value.open()
    for related in obj._state.fields_cache.values():
        if isinstance(related, models.Model):
            _open_instance(related, seen)


class KeysFirstIterable(ModelIterable):
    """Model rows whose sealed values open after one key query per batch read."""

    def _pull(self, rows: Iterator[Any], size: int | None) -> tuple[list[Any], list[Closed]]:
        token = _closed.set([])
        try:
            batch = []
            for obj in rows:
                batch.append(obj)
                if size is not None and len(batch) >= size:
                    break
            return batch, _closed.get() or []
        finally:
            _closed.reset(token)

    def __iter__(self) -> Iterator[Any]:
        rows = super().__iter__()
        size = self.chunk_size if self.chunked_fetch else None
        while True:
            batch, closed = self._pull(rows, size)
            if closed:
                with datakey_scope():
                    datakeys_prefetch({value.run_id() for value in closed} - {None})
                    for obj in batch:
                        _open_instance(obj)
            yield from batch
            if size is None or len(batch) < size:
                return


class SealedQuerySet(models.QuerySet):
    """The queryset of a model with sealed fields: one key query per list (see above)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._iterable_class = KeysFirstIterable
