"""One call of a downstream system, bounded in time (the ledger decides whether to retry),
and args as the database stores them."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from django.db import connection, connections

from agents.effects.errors import ToolTimeout
from audit.canonical import canonical_json


def call_with_timeout(func: Any, args: dict[str, Any], key: str, timeout: float) -> dict[str, Any]:
    """Call the downstream, giving up after ``timeout`` seconds (retryable, same key).

    The call runs in a helper thread so a hung downstream cannot hold the run; a late answer
    is harmless because the next attempt uses the same key. Inside an open transaction (only
    a test case's, since the ledger's own blocks are durable) another thread could not see
    the caller's uncommitted rows, so the call runs inline there.
    """
    if connection.in_atomic_block:
        return func(args, key)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="effect")
    future = pool.submit(_in_thread, func, args, key)
    try:
        return future.result(timeout=timeout)
    except FutureTimeout:
        raise ToolTimeout(f"no answer within {timeout:g}s") from None
    finally:
        pool.shutdown(wait=False)


def _in_thread(func: Any, args: dict[str, Any], key: str) -> dict[str, Any]:
    try:
        return func(args, key)
    finally:
        # This helper thread opened its own connection; do not leave it behind.
        connections.close_all()


def as_stored_json(value: Any) -> Any:
    """The value as the database will give it back (Decimal -> str, tuples -> lists)."""
    return json.loads(canonical_json(value))
