"""Run and thread ids on every log line written while a run advances.

``run_log_context(run_id=..., thread_id=...)`` sets a context variable for the advance;
``RunContextFilter`` (installed on the console's log handler by console/settings_ops.py) copies
it onto each record as ``run_id`` and ``thread_id`` (empty outside an advance), so the JSON
formatter writes them as fields and the plain one may name them.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator
from typing import Any

_RUN: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "console_run", default=None
)


@contextlib.contextmanager
def run_log_context(*, run_id: Any, thread_id: Any = "") -> Iterator[None]:
    token = _RUN.set((str(run_id), str(thread_id or "")))
    try:
        yield
    finally:
        _RUN.reset(token)


def run_log_thread_set(thread_id: Any) -> None:
    """Name the thread once it is known (the run row is read after the advance began)."""
    current = _RUN.get()
    if current is not None:
        _RUN.set((current[0], str(thread_id)))


def run_log_ids() -> tuple[str, str]:
    """(run id, thread id) of the advance this code runs in, or ("", "")."""
    return _RUN.get() or ("", "")


class RunContextFilter(logging.Filter):
    """Adds ``run_id`` and ``thread_id`` to every record (never drops one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        run_id, thread_id = run_log_ids()
        record.run_id = run_id
        record.thread_id = thread_id
        return True
