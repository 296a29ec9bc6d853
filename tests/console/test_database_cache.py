"""The database cache (console/cache.py): Django's semantics, one statement a write, no count of
the table per write, atomic ``add``, and a bounded tidy of expired rows."""

from __future__ import annotations

import threading
from unittest import mock

import pytest
import time_machine
from django.core.cache import cache, caches
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from console import cache as console_cache

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _empty():
    assert isinstance(caches["default"], console_cache.DatabaseCache), caches["default"]
    cache.clear()
    yield
    cache.clear()


def _rows() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM console_cache")
        return cursor.fetchone()[0]


def test_set_get_add_touch_and_delete_keep_djangos_meaning():
    assert cache.set("k", {"a": [1, 2]}, timeout=60) is None
    assert cache.get("k") == {"a": [1, 2]}
    cache.set("k", "replaced", timeout=60)
    assert cache.get("k") == "replaced"
    assert cache.add("k", "not stored", timeout=60) is False
    assert cache.get("k") == "replaced"
    assert cache.add("new", 1, timeout=60) is True
    assert cache.touch("k", timeout=120) is True
    assert cache.touch("missing", timeout=120) is False
    cache.set("forever", "x", timeout=None)
    with time_machine.travel("2099-01-01", tick=False):
        assert cache.get("forever") == "x"
        assert cache.get("k") is None
    assert cache.incr("new") == 2
    cache.delete("k")
    assert cache.get("k", "gone") == "gone"


def test_add_replaces_an_expired_row():
    cache.set("k", "old", timeout=-1)  # stored as expired a second ago
    assert cache.get("k") is None
    assert cache.add("k", "new", timeout=60) is True
    assert cache.get("k") == "new"


def test_a_write_is_one_statement_and_never_counts_the_table():
    cache.set("warm", 1)
    with (
        mock.patch.object(console_cache.random, "random", return_value=0.5),
        CaptureQueriesContext(connection) as queries,
    ):
        cache.set("k", 1, timeout=60)
        cache.add("k2", 1, timeout=60)
        cache.touch("k", timeout=90)
    sql = [q["sql"] for q in queries.captured_queries]
    assert len(sql) == 3, sql
    assert not [s for s in sql if "COUNT(" in s.upper()], sql


def test_inside_a_transaction_a_write_is_kept_apart_by_a_savepoint():
    with transaction.atomic():
        cache.set("k", 1, timeout=60)
        assert cache.get("k") == 1
    assert cache.get("k") == 1


def test_one_write_in_many_deletes_expired_rows_in_a_bounded_batch():
    for n in range(5):
        cache.set(f"old{n}", n, timeout=-1)
    cache.set("live", 1, timeout=60)
    assert _rows() == 6
    with (
        mock.patch.object(console_cache, "EXPIRED_BATCH", 3),
        mock.patch.object(console_cache.random, "random", return_value=0.0),
    ):
        cache.set("another", 1, timeout=60)
        assert _rows() == 7 - 3
        cache.set("another", 2, timeout=60)
    assert _rows() == 2
    assert cache.get("live") == 1 and cache.get("another") == 2


def test_over_max_entries_the_tidy_culls_as_django_does():
    small = caches.create_connection("default")
    small._max_entries, small._cull_frequency = 4, 2
    for n in range(6):
        small.set(f"k{n}", n, timeout=60)
    with mock.patch.object(console_cache.random, "random", return_value=0.0):
        small.set("k6", 6, timeout=60)
    assert _rows() < 7


@pytest.mark.skipif(connection.vendor == "sqlite", reason="SQLite serialises writers")
def test_two_adds_of_one_key_at_once_store_one():
    barrier = threading.Barrier(8)
    won: list[bool] = []

    def add(n: int) -> None:
        from django.db import connections

        barrier.wait()
        try:
            won.append(caches.create_connection("default").add("race", n, timeout=60))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=add, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(won) == [False] * 7 + [True]
