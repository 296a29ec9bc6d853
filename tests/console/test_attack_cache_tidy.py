"""The cache's tidy rides on a write (console/cache.py): when the tidy fails (a deadlock between
two tidies deleting the same expired rows, a lock or statement timeout on the big DELETE of a
cull), the write it rode on must stand and say so. A lost ``set`` of "login-lock:..." is a
lock-out that never happened; an ``add`` that stored its row but answers False lies."""

from __future__ import annotations

from unittest import mock

import pytest
from django.core.cache import cache
from django.db import OperationalError, transaction

from console import cache as console_cache

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _empty():
    cache.clear()
    yield
    cache.clear()


def _tidy_fails():
    return mock.patch.multiple(
        console_cache.DatabaseCache,
        _tidy=mock.Mock(side_effect=OperationalError("deadlock detected")),
    )


def _always_tidy():
    return mock.patch.object(console_cache.random, "random", return_value=0.0)


def test_a_lock_out_set_inside_a_transaction_survives_a_failed_tidy():
    with _always_tidy(), _tidy_fails(), transaction.atomic():
        cache.set("login-lock:u:alice", 123.0, timeout=600)
    assert cache.get("login-lock:u:alice") == 123.0


def test_an_add_whose_row_was_stored_says_true_when_the_tidy_fails():
    with _always_tidy(), _tidy_fails():
        added = cache.add("login-fail:u:alice", 0, timeout=600)
    assert cache.get("login-fail:u:alice") == 0
    assert added is True
