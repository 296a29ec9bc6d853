"""Shared HTTP helpers."""

from __future__ import annotations

from typing import Any

from rest_framework.views import exception_handler


def api_exception_handler(exc: Exception, context: dict[str, Any]):
    """DRF's handler; unknown errors still become 500s, which the tests treat as bugs."""
    return exception_handler(exc, context)
