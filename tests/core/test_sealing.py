"""Envelope encryption under per-run data keys (core/sealing.py)."""

from __future__ import annotations

import json
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.keyring import SealedValueError
from core.models import DataKey
from core.sealing import (
    MARKER,
    DataKeyMissing,
    ErasedDict,
    ErasedText,
    KeyDestroyedError,
    UnreadableDict,
    datakey_create,
    datakey_scope,
    datakeys_destroy,
    datakeys_prefetch,
    is_erased,
    seal,
    seal_text,
    sealed_label,
    token_open,
    unseal,
    unseal_text,
)

pytestmark = pytest.mark.django_db

SECRET = {"email": "ada@example.com", "amount": 125.5, "items": ["été", 1]}


def test_a_sealed_value_opens_only_under_its_run_and_label() -> None:
    run, other = uuid.uuid4(), uuid.uuid4()
    sealed = seal(run, SECRET, label="approvals.AgentRun.input")
    token = sealed[MARKER]
    assert list(sealed) == [MARKER] and token.startswith(f"v1.{run.hex}.")
    assert "ada@example.com" not in json.dumps(sealed)
    assert unseal(sealed, label="approvals.AgentRun.input") == SECRET
    with pytest.raises(SealedValueError):
        token_open(token, label="approvals.AgentRun.output")  # moved to another column
    # A field reads what does not open as "cannot be read" (a page never fails on it).
    unreadable = unseal(sealed, label="approvals.AgentRun.output")
    assert isinstance(unreadable, UnreadableDict) and not unreadable
    assert sealed_label(unreadable).startswith("cannot be read: ")
    datakey_create(other)
    moved = {MARKER: token.replace(run.hex, other.hex)}
    assert isinstance(unseal(moved, label="approvals.AgentRun.input"), UnreadableDict)
    altered = {MARKER: token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]}
    assert isinstance(unseal(altered, label="approvals.AgentRun.input"), UnreadableDict)
    with pytest.raises(SealedValueError):
        token_open(altered[MARKER], label="approvals.AgentRun.input")


def test_the_data_key_is_stored_wrapped_never_in_the_clear() -> None:
    run = uuid.uuid4()
    seal(run, SECRET, label="x")
    wrapped = bytes(DataKey.objects.get(run_id=run).wrapped)
    assert wrapped[0] == 1 and len(wrapped) == 2 + 2 + 12 + 32 + 16  # ring format, id "sk"


def test_a_value_reads_as_erased_once_its_key_is_destroyed() -> None:
    run = uuid.uuid4()
    sealed = seal(run, SECRET, label="x")
    text = seal_text(run, "Traceback: ada@example.com", label="y")
    assert datakeys_destroy([run]) == 1
    erased = unseal(sealed, label="x")
    assert isinstance(erased, ErasedDict) and erased == {} and not erased and is_erased(erased)
    assert erased.sealed == sealed
    erased_text = unseal_text(text, label="y")
    assert isinstance(erased_text, ErasedText) and erased_text == "" and is_erased(erased_text)
    row = DataKey.objects.get(run_id=run)
    assert row.wrapped is None and row.destroyed_at is not None
    with pytest.raises(KeyDestroyedError):
        seal(run, {"new": 1}, label="x")
    assert datakeys_destroy([run]) == 0  # already destroyed


def test_destroying_a_run_that_never_had_a_key_leaves_a_tombstone() -> None:
    run = uuid.uuid4()
    datakeys_destroy([run])
    with pytest.raises(KeyDestroyedError):
        seal(run, {"late": "write"}, label="x")


def test_a_missing_key_row_is_an_integrity_error_not_an_erasure() -> None:
    run = uuid.uuid4()
    sealed = seal(run, SECRET, label="x")
    DataKey.objects.filter(run_id=run).delete()
    with pytest.raises(DataKeyMissing):
        token_open(sealed[MARKER], label="x")
    missing = unseal(sealed, label="x")
    assert "no data key" in sealed_label(missing)


def test_text_keeps_the_empty_string_and_legacy_plaintext() -> None:
    run = uuid.uuid4()
    assert seal_text(run, "", label="y") == ""
    assert unseal_text("a legacy error", label="y") == "a legacy error"
    assert unseal_text(seal_text(run, "boom é", label="y"), label="y") == "boom é"


def test_the_key_cache_ends_with_the_scope() -> None:
    run = uuid.uuid4()
    sealed = seal(run, SECRET, label="x")
    with datakey_scope(), CaptureQueriesContext(connection) as inside:
        for _ in range(5):
            unseal(sealed, label="x")
    assert len(inside) == 1
    with CaptureQueriesContext(connection) as outside:
        unseal(sealed, label="x")
        unseal(sealed, label="x")
    assert len(outside) == 2  # no scope, no cache: an erasure elsewhere is seen at once


def test_prefetch_reads_many_keys_in_one_query() -> None:
    runs = [uuid.uuid4() for _ in range(4)]
    values = [seal(r, {"n": i}, label="x") for i, r in enumerate(runs)]
    datakeys_destroy(runs[:1])
    with datakey_scope(), CaptureQueriesContext(connection) as queries:
        datakeys_prefetch(runs)
        opened = [unseal(v, label="x") for v in values]
    assert len(queries) == 1
    assert is_erased(opened[0]) and opened[1:] == [{"n": 1}, {"n": 2}, {"n": 3}]


def test_an_erasure_in_a_scope_is_seen_by_the_same_scope() -> None:
    run = uuid.uuid4()
    sealed = seal(run, SECRET, label="x")
    with datakey_scope():
        assert unseal(sealed, label="x") == SECRET
        datakeys_destroy([run])
        assert is_erased(unseal(sealed, label="x"))


def test_a_key_made_in_a_rolled_back_savepoint_is_not_used_again() -> None:
    from django.db import transaction

    run = uuid.uuid4()
    with datakey_scope():
        with pytest.raises(RuntimeError), transaction.atomic():
            seal(run, {"a": 1}, label="x")  # makes the run's key, then the savepoint rolls back
            raise RuntimeError
        assert not DataKey.objects.filter(run_id=run).exists()
        later = seal(run, {"b": 2}, label="x")  # a new key, stored this time
    assert DataKey.objects.filter(run_id=run).exists()
    assert unseal(later, label="x") == {"b": 2}
