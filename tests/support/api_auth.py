"""The header an API client sends to authenticate as a user (tests that call the API over
WSGI or HTTP rather than through DRF's test client)."""

from __future__ import annotations

from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token


def api_auth_header(user: User) -> dict[str, str]:
    """``{"Authorization": "Token <key>"}`` for ``user``, creating the token if need be."""
    token, _ = Token.objects.get_or_create(user=user)
    return {"Authorization": f"Token {token.key}"}
