"""One data-key cache per request (core/sealing.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.sealing import datakey_scope


def datakey_scope_middleware(get_response: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def middleware(request: Any) -> Any:
        with datakey_scope():
            return get_response(request)

    return middleware
