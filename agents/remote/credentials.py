"""External agents' keys: ``agk_`` + 43 URL-safe characters; only the SHA-256 is stored."""

from __future__ import annotations

import hashlib
import hmac
import secrets

KEY_PREFIX = "agk_"
# How much of a key the admin shows (to tell keys apart), never enough to use one.
SHOWN_CHARS = 10


def key_make() -> str:
    """A new key (32 random bytes): shown once, then only its hash exists."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def key_prefix(key: str) -> str:
    return key[:SHOWN_CHARS]


def key_looks_valid(key: str) -> bool:
    """The shape of a key (cheap, before any query): prefix, length, URL-safe characters."""
    body = key[len(KEY_PREFIX) :]
    return (
        key.startswith(KEY_PREFIX)
        and len(body) == 43
        and all(c.isalnum() or c in "-_" for c in body)
        and body.isascii()
    )


def key_check(key: str, stored_hash: str) -> bool:
    return hmac.compare_digest(key_hash(key), stored_hash)
