"""API tokens of a person: create (the secret is answered once), list, revoke one or all.

Each change is an audit event ("token.created", "token.revoked") in the same transaction; the
events name the token by its ``token_key`` (the first characters, never the secret).
"""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from audit.services import event_record
from console.models import ApiToken

NAME_MAX = 64
TOKEN_KEY = re.compile(r"[0-9a-f]{1,25}")


def token_list(*, fetched_by: AbstractBaseUser) -> QuerySet[ApiToken]:
    """The reader's own tokens that have not expired, newest first."""
    now = timezone.now()
    return ApiToken.objects.filter(
        Q(expiry__isnull=True) | Q(expiry__gt=now), user=fetched_by
    ).order_by("-created")


def token_create(
    *, user: AbstractBaseUser, name: str = "", request: Any = None
) -> tuple[ApiToken, str]:
    """A new token for ``user`` named after the device; returns the row and its secret."""
    with transaction.atomic():
        token, secret = ApiToken.objects.create(user=user, name=name.strip()[:NAME_MAX])
        event_record(
            action="token.created",
            actor=user,
            data={"token_key": token.token_key, "name": token.name, "expiry": _iso(token.expiry)},
            request=request,
        )
    return token, secret


def token_revoke(*, user: AbstractBaseUser, token_key: str, request: Any = None) -> int:
    """Delete ``user``'s token(s) shown as ``token_key``; the number deleted (0: none)."""
    if not TOKEN_KEY.fullmatch(token_key):  # knox's keys are hex; anything else names none
        return 0
    return _revoke(user=user, tokens=ApiToken.objects.filter(token_key=token_key), request=request)


def token_revoke_all(*, user: AbstractBaseUser, request: Any = None) -> int:
    """Delete every token of ``user``; the number deleted."""
    return _revoke(user=user, tokens=ApiToken.objects.all(), request=request)


def tokens_end_on_password_change(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    """post_save of a user: a new password ends the tokens made with the old one, as Django
    ends the other sessions. ``_password`` holds the raw password only after set_password()
    (a hash upgrade at login clears it first), and only until save() returns."""
    if created or getattr(instance, "_password", None) is None:
        return
    _revoke(user=instance, tokens=ApiToken.objects.all(), request=None, reason="password changed")


def _revoke(
    *, user: AbstractBaseUser, tokens: QuerySet[ApiToken], request: Any, reason: str = ""
) -> int:
    with transaction.atomic():
        keys = sorted(tokens.filter(user=user).values_list("token_key", flat=True))
        if not keys:
            return 0
        deleted, _ = ApiToken.objects.filter(user=user, token_key__in=keys).delete()
        data: dict[str, Any] = {"token_keys": keys}
        if reason:
            data["reason"] = reason
        event_record(action="token.revoked", actor=user, data=data, request=request)
    return deleted


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def token_revoke_as_admin(
    *, tokens: QuerySet[ApiToken], admin: AbstractBaseUser, request: Any
) -> int:
    """An administrator deletes tokens (the admin's delete): one "token.revoked" per owner,
    by the administrator, in the same transaction."""
    with transaction.atomic():
        rows = sorted(tokens.values_list("user_id", "user__username", "token_key"))
        by_owner: dict[tuple[int, str], list[str]] = {}
        for user_id, username, key in rows:
            by_owner.setdefault((user_id, username), []).append(key)
        deleted, _ = ApiToken.objects.filter(pk__in=tokens.values("pk")).delete()
        for (user_id, username), keys in by_owner.items():
            event_record(
                action="token.revoked",
                actor=admin,
                data={"token_keys": keys, "user": username, "user_id": user_id},
                request=request,
            )
    return deleted
