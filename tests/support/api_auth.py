"""Token credentials for API tests: a fresh knox token per call."""

from __future__ import annotations

from typing import Any

from console.tokens import token_create


def api_auth_header(user: Any, *, name: str = "tests") -> dict[str, str]:
    """``{"Authorization": "Token <secret>"}`` of a new token of ``user`` (needs the database)."""
    _, secret = token_create(user=user, name=name)
    return {"Authorization": f"Token {secret}"}
