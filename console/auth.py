"""API authentication: knox tokens (``Authorization: Token <secret>``) that note their last use."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from knox.auth import TokenAuthentication
from rest_framework import exceptions

from console.models import ApiToken

# Writing the last use at most once a minute keeps a busy client from writing on every call.
LAST_USED_EVERY = dt.timedelta(minutes=1)


class ApiTokenAuthentication(TokenAuthentication):
    """knox's scheme (expired tokens are deleted and refused, 401); records ``last_used_at``."""

    def authenticate_credentials(self, token: bytes) -> tuple[Any, ApiToken]:
        try:
            token.decode("utf-8")
        except UnicodeDecodeError:  # knox would let it escape as a 500
            raise exceptions.AuthenticationFailed(_("Invalid token.")) from None
        if b"\x00" in token:  # Postgres text cannot hold NUL: the lookup would be a 500
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        return super().authenticate_credentials(token)

    def validate_user(self, auth_token: ApiToken) -> tuple[Any, ApiToken]:
        user, token = super().validate_user(auth_token)
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at >= LAST_USED_EVERY:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
            token.last_used_at = now
        return user, token


class ApiTokenScheme(OpenApiAuthenticationExtension):
    """The schema's name for the token scheme ("tokenAuth", as with DRF's tokens before)."""

    target_class = ApiTokenAuthentication
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": 'A token from /api/auth/token/, sent as "Token <token>"; it expires '
            "(API_TOKEN_TTL_HOURS) and can be revoked.",
        }
