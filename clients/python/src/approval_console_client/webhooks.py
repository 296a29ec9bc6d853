"""Verify the console's signed callbacks (Standard Webhooks), with the standard library only.

The console signs ``f"{webhook-id}.{webhook-timestamp}.{body}"`` with HMAC-SHA256 under the
base64-decoded ``whsec_`` secret and sends ``webhook-signature: v1,<base64> [v1,<base64> ...]``
(several while a secret is being rotated).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

from .errors import WebhookVerificationError

TOLERANCE_SECONDS = 5 * 60
SECRET_PREFIX = "whsec_"


def _header(headers: Mapping[str, str] | Any, name: str) -> str:
    """``name`` from a mapping of headers, whatever the case of its keys."""
    value = headers.get(name) if hasattr(headers, "get") else None
    if value is None:
        lowered = {str(key).lower(): val for key, val in dict(headers).items()}
        value = lowered.get(name)
    if not value:
        raise WebhookVerificationError(f"missing header {name}")
    return str(value)


def secret_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_<base64>`` secret; refuses a secret with no key in it.

    An empty secret (or a bare ``whsec_``, e.g. an unset variable or a template) would make
    the key the empty string, which anyone can sign with: it raises
    ``WebhookVerificationError`` (a ``ValueError``) instead, as does a secret that is not
    base64.
    """
    if not isinstance(secret, str):
        raise WebhookVerificationError("the secret must be a string (whsec_...)")
    raw = secret[len(SECRET_PREFIX) :] if secret.startswith(SECRET_PREFIX) else secret
    if not raw.strip():
        raise WebhookVerificationError("the secret is empty (set the agent's whsec_... secret)")
    try:
        key = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise WebhookVerificationError("the secret is not base64 (whsec_...)") from exc
    if not key:
        raise WebhookVerificationError("the secret is empty (set the agent's whsec_... secret)")
    return key


def sign(body: bytes, *, msg_id: str, timestamp: int, secret: str) -> str:
    """The ``v1,<base64>`` signature of ``body`` (what the console sends; handy in tests)."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def verify_webhook(
    body: bytes | str,
    headers: Mapping[str, str] | Any,
    *,
    secret: str,
    now: float | None = None,
    tolerance: int = TOLERANCE_SECONDS,
) -> dict[str, Any]:
    """The callback's JSON body, once its signature and timestamp check out.

    Raises ``WebhookVerificationError`` for an empty or malformed ``secret``, a missing header, a timestamp more than
    ``tolerance`` seconds away from ``now``, no matching ``v1`` signature, or a body that is
    not a JSON object.
    """
    raw = body.encode() if isinstance(body, str) else bytes(body)
    secret_key(secret)  # an empty secret verifies nothing, whatever the headers say
    msg_id = _header(headers, "webhook-id")
    stamp = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    try:
        timestamp = int(stamp)
    except ValueError as exc:
        raise WebhookVerificationError("webhook-timestamp is not an integer") from exc
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise WebhookVerificationError("webhook-timestamp is too old or too new")
    expected = sign(raw, msg_id=msg_id, timestamp=timestamp, secret=secret)
    matched = False
    for candidate in signatures.split():
        version, _, _ = candidate.partition(",")
        # Compare every candidate (no early exit), each in constant time.
        if version == "v1" and hmac.compare_digest(candidate.encode(), expected.encode()):
            matched = True
    if not matched:
        raise WebhookVerificationError("no matching signature")
    try:
        payload = json.loads(raw)
    except ValueError as exc:
        raise WebhookVerificationError("the body is not JSON") from exc
    if not isinstance(payload, dict):
        raise WebhookVerificationError("the body is not a JSON object")
    return payload
