"""verify_webhook under attack: a forged callback must never verify."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import pytest
from approval_console_client import WebhookVerificationError, verify_webhook
from approval_console_client.webhooks import sign

SECRET = "whsec_" + base64.b64encode(b"s" * 32).decode()
BODY = json.dumps({"type": "approval_request.decided", "id": "r-1", "status": "decided"}).encode()


def forged(body: bytes, key: bytes, *, msg_id: str = "msg_1") -> dict[str, str]:
    """Headers an attacker signs with ``key`` (here: the empty key anyone knows)."""
    stamp = int(time.time())
    digest = hmac.new(key, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": "v1," + base64.b64encode(digest).decode(),
    }


@pytest.mark.parametrize("secret", ["", "whsec_"])
def test_an_empty_secret_verifies_nothing(secret):
    """A blank CONSOLE_CALLBACK_SECRET (``whsec_`` from a template, an unset variable read as
    ""): HMAC under the empty key, which anyone can compute, must not pass as a signature."""
    with pytest.raises((WebhookVerificationError, ValueError)):
        verify_webhook(BODY, forged(BODY, b""), secret=secret)


def _valid() -> dict[str, str]:
    stamp = int(time.time())
    return {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(BODY, msg_id="msg_1", timestamp=stamp, secret=SECRET),
    }


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(
            lambda h: {**h, "webhook-signature": "v1a," + h["webhook-signature"][3:]}, id="v1a"
        ),
        pytest.param(
            lambda h: {**h, "webhook-signature": "V1," + h["webhook-signature"][3:]}, id="V1"
        ),
        pytest.param(lambda h: {**h, "webhook-signature": h["webhook-signature"][3:]}, id="bare"),
        pytest.param(lambda h: {**h, "webhook-signature": "v1,"}, id="empty-sig"),
        pytest.param(lambda h: {**h, "webhook-id": "msg_2"}, id="other-id"),
        pytest.param(
            lambda h: {**h, "webhook-timestamp": str(int(h["webhook-timestamp"]) + 1)}, id="ts+1"
        ),
        pytest.param(lambda h: {**h, "webhook-timestamp": "1e9"}, id="ts-float"),
        pytest.param(
            lambda h: {k: v for k, v in h.items() if k != "webhook-signature"}, id="nosig"
        ),
    ],
)
def test_a_tampered_header_does_not_verify(tamper):
    with pytest.raises(WebhookVerificationError):
        verify_webhook(BODY, tamper(_valid()), secret=SECRET)


def test_a_reencoded_body_does_not_verify():
    headers = _valid()
    reencoded = json.dumps(json.loads(BODY), indent=1).encode()
    with pytest.raises(WebhookVerificationError):
        verify_webhook(reencoded, headers, secret=SECRET)


def test_an_old_signature_does_not_verify_with_a_fresh_timestamp():
    old = int(time.time()) - 3600
    sig = sign(BODY, msg_id="msg_1", timestamp=old, secret=SECRET)
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(old), "webhook-signature": sig}
    with pytest.raises(WebhookVerificationError, match="too old"):
        verify_webhook(BODY, headers, secret=SECRET)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(BODY, {**headers, "webhook-timestamp": str(int(time.time()))}, secret=SECRET)
