"""The master key ring: AES-256-GCM keys with ids, from ``ENCRYPTION_KEYS``.

``ENCRYPTION_KEYS`` is ``id:base64key[,id:base64key...]``; the first key encrypts, every key
decrypts, so a key rotates by putting a new one first and keeping the old ones until nothing
is encrypted under them. Unset, one key is derived from SECRET_KEY (id ``sk``): zero
configuration for ``make run`` and the tests; ``check --deploy`` asks for real keys.

A sealed value is ``b"\\x01" + len(id) + id + nonce(12) + ciphertext-with-tag``: the id says
which key opens it, so old values stay readable after a rotation.
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass
from functools import lru_cache

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.core.exceptions import ImproperlyConfigured

VARIABLE = "ENCRYPTION_KEYS"
DERIVED_KEY_ID = "sk"
_FORMAT = 1
_NONCE = 12


class KeyMissingError(LookupError):
    """A value was sealed under a key id the ring does not hold (removed, or never set)."""


class SealedValueError(ValueError):
    """Not a sealed value, or it was altered (the GCM tag does not match)."""


@dataclass(frozen=True)
class KeyRing:
    """Keys by id; ``current`` seals, any of them opens."""

    keys: dict[str, bytes]
    current: str

    def seal(self, plaintext: bytes, *, aad: bytes = b"") -> bytes:
        kid = self.current.encode()
        nonce = os.urandom(_NONCE)
        sealed = AESGCM(self.keys[self.current]).encrypt(nonce, plaintext, aad)
        return bytes([_FORMAT, len(kid)]) + kid + nonce + sealed

    def open(self, sealed: bytes, *, aad: bytes = b"") -> bytes:
        kid, nonce, body = sealed_parts(sealed)
        key = self.keys.get(kid)
        if key is None:
            raise KeyMissingError(f"no key {kid!r} in {VARIABLE}")
        try:
            return AESGCM(key).decrypt(nonce, body, aad)
        except Exception as exc:  # cryptography's InvalidTag
            raise SealedValueError("the sealed value does not open: altered or wrong key") from exc


def sealed_parts(sealed: bytes) -> tuple[str, bytes, bytes]:
    """(key id, nonce, ciphertext) of a sealed value."""
    if len(sealed) < 2 or sealed[0] != _FORMAT:
        raise SealedValueError("not a sealed value")
    end = 2 + sealed[1]
    if len(sealed) < end + _NONCE + 16:
        raise SealedValueError("sealed value too short")
    return sealed[2:end].decode(), sealed[end : end + _NONCE], sealed[end + _NONCE :]


def keyring_parse(raw: str, *, secret_key: str) -> KeyRing:
    """The ring from the variable's text; empty derives one key from ``secret_key``."""
    if not raw.strip():
        derived = HKDF(
            algorithm=hashes.SHA256(), length=32, salt=None, info=b"console-master-key"
        ).derive(secret_key.encode())
        return KeyRing(keys={DERIVED_KEY_ID: derived}, current=DERIVED_KEY_ID)
    keys: dict[str, bytes] = {}
    order: list[str] = []
    for item in raw.split(","):
        kid, sep, encoded = item.strip().partition(":")
        if not sep or not kid or len(kid) > 32 or not kid.replace("-", "").isalnum():
            raise ImproperlyConfigured(
                f"{VARIABLE} must be id:base64key[,id:base64key...] with ids of letters, digits "
                f"and '-' (at most 32), got an item {item.strip()[:40]!r}"
            )
        try:
            key = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise ImproperlyConfigured(f"{VARIABLE}: key {kid!r} is not base64") from None
        if len(key) != 32:
            raise ImproperlyConfigured(
                f"{VARIABLE}: key {kid!r} must be 32 bytes (AES-256), got {len(key)}"
            )
        if kid in keys:
            raise ImproperlyConfigured(f"{VARIABLE}: key id {kid!r} appears twice")
        keys[kid] = key
        order.append(kid)
    return KeyRing(keys=keys, current=order[0])


@lru_cache(maxsize=4)
def _ring(raw: str, secret_key: str) -> KeyRing:
    return keyring_parse(raw, secret_key=secret_key)


def keyring_get() -> KeyRing:
    """This process's ring, from settings (re-read when a test overrides them)."""
    from django.conf import settings

    return _ring(settings.ENCRYPTION_KEYS, settings.SECRET_KEY)
