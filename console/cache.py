"""The database cache without a ``COUNT(*)`` of its table on every write.

Django's ``DatabaseCache`` counts the whole table before each ``set``/``add``/``touch`` (to
decide whether to cull), then writes in a transaction of its own: five statements, and the
count grows with the table. Every API request writes two throttle histories (the user's and,
for a decision, the decide scope), so at 100k rows (one per address that ever called, one per
username tried) each request paid two scans of the table, about 70 ms each at 1M rows. Here a
write is one statement (``INSERT ... ON CONFLICT``, atomic on Postgres and SQLite alike: two
``add`` calls for one key cannot both win), and one write in ``CULL_EVERY`` deletes a bounded
batch of expired rows and counts the table, culling as Django does when it is over
``MAX_ENTRIES``. Reads, deletes and the table are Django's.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import pickle
import random
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.db import DatabaseCache as DjangoDatabaseCache
from django.db import DatabaseError, connections, router, transaction
from django.utils.timezone import now as tz_now

# One write in this many tidies the table (amortised: 0.1% of a count per write).
CULL_EVERY = 1000
# Expired rows deleted per tidy: bounded, so a write never waits on a huge delete.
EXPIRED_BATCH = 1000


class DatabaseCache(DjangoDatabaseCache):
    def _base_set(self, mode: str, key: str, value: Any, timeout: Any = DEFAULT_TIMEOUT) -> bool:
        timeout = self.get_backend_timeout(timeout)
        db = router.db_for_write(self.cache_model_class)
        connection = connections[db]
        quote = connection.ops.quote_name
        table = quote(self._table)
        now = tz_now().replace(microsecond=0)
        # As Django's: a naive maximum for "never", an aware time otherwise.
        if timeout is None:
            expires = dt.datetime.max
        else:
            expires = dt.datetime.fromtimestamp(timeout, tz=dt.UTC)
        expires = connection.ops.adapt_datetimefield_value(expires.replace(microsecond=0))
        key_col, value_col, expires_col = quote("cache_key"), quote("value"), quote("expires")
        if mode == "touch":
            sql = f"UPDATE {table} SET {expires_col} = %s WHERE {key_col} = %s"
            params: list[Any] = [expires, key]
        else:
            pickled = pickle.dumps(value, self.pickle_protocol)
            # The column holds text (Django's own encoding, so its reads decode it).
            encoded = base64.b64encode(pickled).decode("latin1")
            # ``add`` replaces a row only once it has expired, as Django's does.
            only_expired = f" WHERE {table}.{expires_col} < %s" if mode == "add" else ""
            sql = (
                f"INSERT INTO {table} ({key_col}, {value_col}, {expires_col}) VALUES (%s, %s, %s) "
                f"ON CONFLICT ({key_col}) DO UPDATE SET {value_col} = excluded.{value_col}, "
                f"{expires_col} = excluded.{expires_col}{only_expired}"
            )
            params = [key, encoded, expires]
            if mode == "add":
                params.append(connection.ops.adapt_datetimefield_value(now))
        try:
            # Inside a caller's transaction a savepoint keeps a failed write from spoiling it;
            # alone, the one statement is its own transaction.
            keep_apart = transaction.atomic(using=db) if connection.in_atomic_block else None
            with keep_apart or contextlib.nullcontext(), connection.cursor() as cursor:
                cursor.execute(sql, params)
                written = cursor.rowcount > 0
        except DatabaseError:
            return False  # as Django's: a cache write may fail quietly
        if mode != "touch" and random.random() < 1 / CULL_EVERY:
            # After the write and apart from it: a tidy that fails (two tidies deadlocking on
            # the same expired rows, a timeout on a cull's DELETE) neither undoes the write
            # (a lock-out) nor makes it report failure.
            try:
                apart = transaction.atomic(using=db) if connection.in_atomic_block else None
                with apart or contextlib.nullcontext(), connection.cursor() as cursor:
                    self._tidy(db, cursor, now)
            except DatabaseError:
                pass  # the next tidy tries again
        return written

    def incr(self, key: str, delta: int = 1, version: int | None = None) -> int:
        """As Redis's INCRBY: the key keeps its expiry. Django's ``incr`` is a get and a set with
        the cache's default timeout (300 s), so each increment would move a login-failure count
        of a 900 s window to expire 300 s later (console/lockout.py)."""
        value = self.get(key, self._missing_key, version=version)
        if value is self._missing_key:
            raise ValueError(f"Key '{key}' not found")
        new = value + delta
        db = router.db_for_write(self.cache_model_class)
        connection = connections[db]
        quote = connection.ops.quote_name
        table = quote(self._table)
        encoded = base64.b64encode(pickle.dumps(new, self.pickle_protocol)).decode("latin1")
        now = connection.ops.adapt_datetimefield_value(tz_now().replace(microsecond=0))
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET {quote('value')} = %s "
                f"WHERE {quote('cache_key')} = %s AND {quote('expires')} >= %s",
                [encoded, self.make_and_validate_key(key, version=version), now],
            )
            if cursor.rowcount == 0:  # expired or deleted since the read
                raise ValueError(f"Key '{key}' not found")
        return new

    def _tidy(self, db: str, cursor: Any, now: dt.datetime) -> None:
        """Delete a batch of expired rows; cull as Django does when still over the limit."""
        connection = connections[db]
        quote = connection.ops.quote_name
        table, key_col = quote(self._table), quote("cache_key")
        cursor.execute(
            f"DELETE FROM {table} WHERE {key_col} IN (SELECT {key_col} FROM {table} "
            f"WHERE {quote('expires')} < %s LIMIT {EXPIRED_BATCH})",
            [connection.ops.adapt_datetimefield_value(now)],
        )
        cursor.execute(f"SELECT COUNT(*) FROM {table}")
        num = cursor.fetchone()[0]
        if num > self._max_entries:
            self._cull(db, cursor, now, num)
