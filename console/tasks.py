"""django-q2 tasks of the console: fetch, call one function, nothing more."""

from __future__ import annotations

from console.health import worker_heartbeat_record


def worker_heartbeat() -> str:
    """Every minute (Schedule from console migration 0005): this worker is alive."""
    return worker_heartbeat_record()
