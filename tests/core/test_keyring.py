"""The master key ring: seal with the first key, open with any, refuse bad settings."""

from __future__ import annotations

import base64
import os

import pytest
from django.core.exceptions import ImproperlyConfigured

from core.keyring import KeyMissingError, SealedValueError, keyring_parse


def _key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def test_a_value_sealed_under_an_old_key_opens_after_rotation() -> None:
    old = keyring_parse(f"k1:{_key()}", secret_key="s")
    sealed = old.seal(b"secret", aad=b"run-1")
    rotated = keyring_parse(
        f"k2:{_key()},k1:{base64.b64encode(old.keys['k1']).decode()}", secret_key="s"
    )
    assert rotated.current == "k2"
    assert rotated.open(sealed, aad=b"run-1") == b"secret"
    assert rotated.open(rotated.seal(b"new")) == b"new"


def test_a_removed_key_or_an_altered_value_does_not_open() -> None:
    ring = keyring_parse(f"k1:{_key()}", secret_key="s")
    sealed = ring.seal(b"secret")
    with pytest.raises(KeyMissingError):
        keyring_parse(f"k2:{_key()}", secret_key="s").open(sealed)
    with pytest.raises(SealedValueError):
        ring.open(sealed[:-1] + bytes([sealed[-1] ^ 1]))
    with pytest.raises(SealedValueError):
        ring.open(sealed, aad=b"another run")
    with pytest.raises(SealedValueError):
        ring.open(b"plain text")


def test_unset_derives_one_key_from_the_secret_key() -> None:
    one = keyring_parse("", secret_key="a")
    assert one.current == "sk"
    assert one.open(keyring_parse("", secret_key="a").seal(b"x")) == b"x"
    with pytest.raises(SealedValueError):
        keyring_parse("", secret_key="b").open(one.seal(b"x"))


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("k1", "id:base64key"),
        ("k1:not base64!", "not base64"),
        (f"k1:{base64.b64encode(b'short').decode()}", "32 bytes"),
        ("k1:" + _key() + ",k1:" + _key(), "appears twice"),
        ("bad id:" + _key(), "id:base64key"),
    ],
)
def test_a_bad_setting_names_the_variable(raw: str, says: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="ENCRYPTION_KEYS") as caught:
        keyring_parse(raw, secret_key="s")
    assert says in str(caught.value)
