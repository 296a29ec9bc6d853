"""Login lock-out: too many failed sign-ins for one username, or from one address, lock it.

LOGIN_LOCKOUT_FAILURES failures within LOGIN_LOCKOUT_WINDOW_SECONDS lock the username (and,
separately, the address) for LOGIN_LOCKOUT_SECONDS. The counts live in the default cache, which
every web process shares (the database cache, or Redis). The database cache's ``incr`` is a read
and a write, so two failures at the same instant may count once: a limit, not a ledger.
"""

from __future__ import annotations

import hashlib
import math
import time

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest
from rest_framework.throttling import BaseThrottle

from core.throttles import username_key


def client_ip(request: HttpRequest) -> str:
    """The client's address as the API throttles see it (REST_FRAMEWORK["NUM_PROXIES"])."""
    return BaseThrottle().get_ident(request)


def _subjects(*, username: str, ip: str) -> list[str]:
    name = username_key(username)
    address = hashlib.sha256(ip.encode("utf-8", "surrogatepass")).hexdigest()
    return [f"u:{name}"] + ([f"ip:{address}"] if ip else [])


def login_locked_for(*, username: str, ip: str) -> int:
    """Seconds until this username and address may try again (0: not locked)."""
    now = time.time()
    until = cache.get_many([f"login-lock:{s}" for s in _subjects(username=username, ip=ip)])
    return max((math.ceil(t - now) for t in until.values() if t > now), default=0)


def login_failure_record(*, username: str, ip: str) -> int:
    """Count one failed sign-in; the seconds of the lock-out it starts (0: none yet)."""
    locked = 0
    for subject in _subjects(username=username, ip=ip):
        key = f"login-fail:{subject}"
        cache.add(key, 0, timeout=settings.LOGIN_LOCKOUT_WINDOW_SECONDS)
        try:
            failures = cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, failures := 1, timeout=settings.LOGIN_LOCKOUT_WINDOW_SECONDS)
        if failures >= settings.LOGIN_LOCKOUT_FAILURES:
            seconds = settings.LOGIN_LOCKOUT_SECONDS
            cache.set(f"login-lock:{subject}", time.time() + seconds, timeout=seconds)
            cache.delete(key)
            locked = seconds
    return locked


def login_failures_clear(*, username: str) -> None:
    """A successful sign-in forgets the username's failures (not the address's)."""
    cache.delete(f"login-fail:{_subjects(username=username, ip='')[0]}")
