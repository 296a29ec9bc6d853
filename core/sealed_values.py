"""The kinds of values and errors of sealing (core/sealing.py), apart for size."""

from __future__ import annotations

from typing import Any

from core.keyring import SealedValueError


class DataKeyMissing(LookupError):
    """A sealed value names a run that has no data key row: an integrity error, never erasure."""


class KeyDestroyedError(RuntimeError):
    """A write for a run whose data key was destroyed (the run was erased)."""


class DataKeyUnreadable(SealedValueError):
    """The run's data key cannot be unwrapped: the master key that wrapped it is gone from
    ``ENCRYPTION_KEYS`` (or the wrapped key was altered). Reads say so; writes raise."""


class PlaintextRefused(TypeError):
    """Plaintext reached a sealed column by a path that cannot seal it (update(), raw SQL)."""


class Sealed(dict):
    """A sealed JSON value: the envelope ``{"$sealed": token}``, ready to store."""


class SealedText(str):
    """A sealed text value: the envelope's JSON text, ready to store."""


class ErasedDict(dict):
    """What a sealed JSON value reads as once its key is destroyed: empty, falsy. ``sealed``
    keeps the stored envelope so a save of the instance writes it back unchanged."""

    def __init__(self, sealed: Sealed) -> None:
        super().__init__()
        self.sealed = sealed


class ErasedText(str):
    """What a sealed text reads as once its key is destroyed: ``""``; ``sealed`` as above."""

    sealed: SealedText

    def __new__(cls, sealed: SealedText) -> ErasedText:
        self = super().__new__(cls, "")
        self.sealed = sealed
        return self


class UnreadableDict(ErasedDict):
    """What a sealed JSON value reads as while its run's data key cannot be unwrapped (a master
    key removed too early): empty like an erased value, with the reason; never an erasure."""

    def __init__(self, sealed: Sealed, reason: str) -> None:
        super().__init__(sealed)
        self.reason = reason


class UnreadableText(ErasedText):
    reason: str

    def __new__(cls, sealed: SealedText, reason: str) -> UnreadableText:
        self = super().__new__(cls, sealed)
        self.reason = reason
        return self


ERASED_LABEL = "erased"
UNREADABLE_LABEL = "cannot be read"


def is_erased(value: Any) -> bool:
    """Whether a sealed value reads empty because it cannot be opened: erased (its key was
    destroyed) or, see ``sealed_label``, unreadable (its key's master key is missing)."""
    return isinstance(value, (ErasedDict, ErasedText))


def sealed_label(value: Any) -> str:
    """What a page says in place of a value that ``is_erased``."""
    reason = getattr(value, "reason", None)
    return f"{UNREADABLE_LABEL}: {reason}" if reason else ERASED_LABEL
