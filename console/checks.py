"""Deployment checks of our own, run by ``manage.py check --deploy`` beside Django's."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, register


@register(Tags.security, deploy=True)
def secret_key_is_not_the_development_key(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """The built-in key is public: sessions, CSRF tokens and password resets signed with it
    can be forged by anyone who read the source."""
    if settings.SECRET_KEY != settings.DEVELOPMENT_SECRET_KEY:
        return []
    return [
        Error(
            "SECRET_KEY is the built-in development key, which is public.",
            hint="Set SECRET_KEY to a long random value, e.g. the output of "
            "`python -c 'import secrets; print(secrets.token_urlsafe(50))'` "
            "(and DJANGO_REQUIRE_SECRET_KEY=true to refuse to start without one).",
            id="console.E001",
        )
    ]


@register(Tags.security, deploy=True)
def encryption_keys_are_set(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """Without ENCRYPTION_KEYS the master key derives from SECRET_KEY: rotating one would make
    every sealed value unreadable (checkpoints, and every run's data key: the personal data of
    every run would be erased)."""
    if settings.ENCRYPTION_KEYS.strip():
        return []
    return [
        Error(
            "ENCRYPTION_KEYS is not set: the master key is derived from SECRET_KEY, so changing "
            "SECRET_KEY would erase the personal data of every run.",
            hint="Set ENCRYPTION_KEYS=k1:<base64 of 32 random bytes>, e.g. "
            "`python -c 'import base64, os; print(\"k1:\" + base64.b64encode(os.urandom(32)).decode())'`"
            " (docs/operations.md: key rotation).",
            id="console.E002",
        )
    ]
