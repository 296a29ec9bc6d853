"""A stand-in for your CRM's API (in memory, one per process).

Like a real payments or CRM API, writes take an idempotency key and a repeated key returns the
first answer instead of acting twice.
"""

from __future__ import annotations

import threading
from typing import Any

CUSTOMERS: dict[str, dict[str, Any]] = {
    "C-42": {"name": "Ada Lovelace", "plan": "pro", "balance": 0, "status": "open"},
    "C-7": {"name": "Alan Turing", "plan": "basic", "balance": 0, "status": "open"},
}
_seen: dict[str, dict[str, Any]] = {}
_lock = threading.Lock()


def customer_get(customer_id: str) -> dict[str, Any] | None:
    customer = CUSTOMERS.get(customer_id)
    return {"id": customer_id, **customer} if customer else None


def credit_issue(*, customer_id: str, amount: int, key: str) -> dict[str, Any]:
    with _lock:
        if key in _seen:
            return _seen[key]
        customer = CUSTOMERS[customer_id]
        customer["balance"] += amount
        _seen[key] = {
            "customer_id": customer_id,
            "credited": amount,
            "balance": customer["balance"],
        }
        return _seen[key]


def account_close(*, customer_id: str, key: str) -> dict[str, Any]:
    with _lock:
        if key in _seen:
            return _seen[key]
        CUSTOMERS[customer_id]["status"] = "closed"
        _seen[key] = {"customer_id": customer_id, "status": "closed"}
        return _seen[key]
