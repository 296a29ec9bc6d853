"""The agent's side effect: refunds in its own SQLite "payments" table, once per key.

The table's primary key is the console's idempotency key, so running the same approved call
twice (a crash after the refund, before the checkpoint) pays once.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Annotated, Any

from approval_console_client import current_idempotency_key
from langchain_core.tools import BaseTool, InjectedToolArg, tool


class Payments:
    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS payments (idempotency_key TEXT PRIMARY KEY, "
            "order_id TEXT NOT NULL, amount_cents INTEGER NOT NULL, "
            "created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
        )

    def refund(self, *, key: str, order_id: str, amount_cents: int) -> bool:
        """Pay once per key: True if this call paid, False if the key had paid already."""
        with self._lock:
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO payments (idempotency_key, order_id, amount_cents) "
                "VALUES (?, ?, ?)",
                (key, order_id, amount_cents),
            )
            return cursor.rowcount == 1

    def all(self) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT idempotency_key, order_id, amount_cents, created_at FROM payments "
                "ORDER BY created_at, idempotency_key"
            ).fetchall()
        keys = ("idempotency_key", "order_id", "amount_cents", "created_at")
        return [dict(zip(keys, row, strict=True)) for row in rows]


def refund_tool(payments: Payments) -> BaseTool:
    @tool
    def refund_issue(
        order_id: str,
        amount_cents: int,
        idempotency_key: Annotated[str, InjectedToolArg] = "",
    ) -> str:
        """Refund ``amount_cents`` to the customer of ``order_id``."""
        key = idempotency_key or current_idempotency_key()
        if not key:
            raise ValueError("refund_issue runs only under an approval (no idempotency key)")
        if payments.refund(key=key, order_id=order_id, amount_cents=amount_cents):
            return f"refunded {amount_cents} cents for order {order_id}"
        return f"already refunded for order {order_id} (same idempotency key)"

    return refund_issue
