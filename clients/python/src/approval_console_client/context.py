"""The console's idempotency key of the governed tool call now running (a context variable)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

_IDEMPOTENCY_KEY: ContextVar[str | None] = ContextVar("console_idempotency_key", default=None)


def current_idempotency_key() -> str | None:
    """Inside a tool the console approved: the key it issued for this action (``cak_...``).

    Pass it downstream (a payment provider's ``Idempotency-Key``, a unique column) so the
    effect happens once even if the agent crashes and runs the call again. ``None`` outside
    a governed call.
    """
    return _IDEMPOTENCY_KEY.get()


@contextlib.contextmanager
def idempotency_key_set(key: str) -> Iterator[None]:
    """Make ``current_idempotency_key()`` answer ``key`` within the block."""
    token = _IDEMPOTENCY_KEY.set(key)
    try:
        yield
    finally:
        _IDEMPOTENCY_KEY.reset(token)
