"""DRF throttles whose rates come from ``settings.API_THROTTLE_RATES`` at each request.

DRF's own classes copy ``DEFAULT_THROTTLE_RATES`` when the class is defined, so a rate changed
by the environment of a test (``override_settings``) would never be seen. The counts live in
the default cache, which the settings make shared by every process (database or Redis).
"""

from __future__ import annotations

import hashlib
import unicodedata
from typing import Any

from django.conf import settings
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle


def username_key(username: str) -> str:
    """One key for every spelling of a username that signs in as the same person: the login
    form authenticates NFKC(stripped text) (Django's UsernameField), so "ａｌｉｃｅ" is alice;
    lower-cased on top, as documented. Hashed: a cache key has a bounded length and any text
    may be tried as a username. Shared by the token throttle and the login lock-out."""
    normal = unicodedata.normalize("NFKC", username.strip()).strip().lower()
    return hashlib.sha256(normal.encode("utf-8", "surrogatepass")).hexdigest()


class _SettingsRate:
    scope: str

    def get_rate(self) -> str:
        return settings.API_THROTTLE_RATES[self.scope]


class UserThrottle(_SettingsRate, UserRateThrottle):
    """Every API call of a signed-in person (by address when anonymous)."""

    scope = "user"


class AnonThrottle(_SettingsRate, AnonRateThrottle):
    """Every API call without credentials, by address."""

    scope = "anon"


class TokenIpThrottle(_SettingsRate, SimpleRateThrottle):
    """Sign-in attempts for a token, by address."""

    scope = "token_ip"

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class TokenUsernameThrottle(_SettingsRate, SimpleRateThrottle):
    """Sign-in attempts for a token, by the username tried (from any address)."""

    scope = "token_username"

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        username = request.data.get("username") if hasattr(request.data, "get") else None
        if isinstance(username, (int, float)) and not isinstance(username, bool):
            username = str(username)  # as the serializer's CharField reads it
        if not isinstance(username, str) or not username:
            return None  # the serializer names the missing field
        return self.cache_format % {"scope": self.scope, "ident": username_key(username)}


class DecideThrottle(_SettingsRate, UserRateThrottle):
    """Decisions of one person, through the API and the approval page alike."""

    scope = "decide"
