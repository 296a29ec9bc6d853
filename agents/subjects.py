"""The blind index of data subjects: which runs name an e-mail address or a customer id,
found without storing the value (``manage.py erase --subject``).

What counts: the input keys an agent declares (``AgentSpec.subjects``, e.g.
``{"customer_email": "email"}``), plus every e-mail address in any string of the input, so an
agent that declares nothing is still erasable by address. Values are normalized (e-mail:
stripped, lower-cased; ids: stripped, case-folded: over-matching is the safe side of erasure)
and stored as ``HMAC-SHA256(HKDF(master key, "console-blind-index"), kind:value)`` under the
current master key; a lookup tries every key of the ring, so a rotation loses nothing.

Only the input is indexed: a subject named only in a tool result or the output is not found.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from agents.erasure_models import SubjectIndex
from agents.runtime.registry import UnknownAgent, agent_get
from approvals.models import AgentRun
from core.keyring import keyring_get

EMAIL = "email"
CUSTOMER = "customer"
KINDS = (EMAIL, CUSTOMER)
_INFO = b"console-blind-index"
# Permissive on purpose (over-matching is the safe side): local@domain.tld inside any text.
_EMAIL_RE = re.compile(r"[^\s@<>()\[\],;:\"']+@[^\s@<>()\[\],;:\"']+\.[^\s@<>()\[\],;:\"'.]+")


def subject_normalize(kind: str, value: Any) -> str:
    text = str(value).strip()
    return text.lower() if kind == EMAIL else text.casefold()


@lru_cache(maxsize=16)
def _index_key(key_id: str, master: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(master)


def subject_digest(kind: str, value: Any, *, key_id: str | None = None) -> tuple[str, str]:
    """(digest, key id) of a subject under one ring key (default: the current one)."""
    ring = keyring_get()
    kid = key_id or ring.current
    message = f"{kind}:{subject_normalize(kind, value)}".encode()
    digest = hmac.new(_index_key(kid, ring.keys[kid]), message, hashlib.sha256).hexdigest()
    return digest, kid


def subject_digests(kind: str, value: Any) -> list[str]:
    """The subject's digest under every key of the ring (what a lookup looks for)."""
    return [subject_digest(kind, value, key_id=kid)[0] for kid in keyring_get().keys]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def subjects_of(run_input: Any, *, declared: dict[str, str] | None = None) -> set[tuple[str, str]]:
    """(kind, normalized value) of every subject the input names."""
    found: set[tuple[str, str]] = set()
    if isinstance(run_input, dict):
        for key, kind in (declared or {}).items():
            value = run_input.get(key)
            if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
                found.add((kind, subject_normalize(kind, value)))
    for text in _strings(run_input):
        found.update((EMAIL, subject_normalize(EMAIL, m)) for m in _EMAIL_RE.findall(text))
    return found


def _declared(agent: str) -> dict[str, str]:
    try:
        return dict(agent_get(agent).subjects)
    except UnknownAgent:
        return {}  # an agent gone from the registry: its e-mail addresses are still indexed


Digest = tuple[str, str, str]  # (kind, digest, key id)


def subject_digests_of(run_input: Any, *, declared: dict[str, str]) -> list[Digest]:
    """What the index keeps for an input, under the current master key (no query)."""
    return [
        (kind, *subject_digest(kind, value))
        for kind, value in sorted(subjects_of(run_input, declared=declared))
    ]


def subjects_write(*, run: AgentRun, digests: list[Digest]) -> None:
    """Store a new run's digests (in the caller's transaction: the run's own)."""
    rows = [SubjectIndex(run=run, kind=k, digest=d, key_id=kid) for k, d, kid in digests]
    if rows:
        SubjectIndex.objects.bulk_create(rows, ignore_conflicts=True)


def subjects_index(*, run: AgentRun, run_input: Any, declared: dict[str, str] | None = None) -> int:
    """Index the subjects of a new run (in the caller's transaction: the run's own)."""
    declared = _declared(run.agent) if declared is None else declared
    digests = subject_digests_of(run_input, declared=declared)
    subjects_write(run=run, digests=digests)
    return len(digests)


def subject_runs(*, value: str, kind: str = EMAIL) -> list[Any]:
    """Ids of the runs whose input names the subject (under any key of the ring)."""
    digests = subject_digests(kind, value)
    return list(
        SubjectIndex.objects.filter(kind=kind, digest__in=digests)
        .values_list("run_id", flat=True)
        .distinct()
    )


def subjects_delete(run_ids: Iterable[Any]) -> int:
    """Forget the runs' digests (erasure: a digest left behind would confirm a guess)."""
    return SubjectIndex.objects.filter(run_id__in=list(run_ids)).delete()[0]
