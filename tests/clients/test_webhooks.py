"""verify_webhook against the Standard Webhooks scheme the console signs callbacks with."""

from __future__ import annotations

import base64
import datetime as dt
import json
import time

import pytest
from approval_console_client import ConsoleClient, WebhookVerificationError, verify_webhook
from approval_console_client.webhooks import sign
from standardwebhooks import Webhook

SECRET = "whsec_" + base64.b64encode(b"s" * 32).decode()
OTHER = "whsec_" + base64.b64encode(b"o" * 32).decode()
BODY = json.dumps({"type": "approval_request.decided", "id": "r-1", "status": "decided"}).encode()


def headers_for(body: bytes, *, secret: str = SECRET, at: float | None = None) -> dict[str, str]:
    stamp = int(time.time() if at is None else at)
    return {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(body, msg_id="msg_1", timestamp=stamp, secret=secret),
    }


def test_a_valid_callback_gives_its_body():
    assert verify_webhook(BODY, headers_for(BODY), secret=SECRET)["id"] == "r-1"
    assert ConsoleClient.verify_webhook(BODY, headers_for(BODY), secret=SECRET)["id"] == "r-1"


def test_a_signature_made_by_the_standardwebhooks_library_verifies():
    now = dt.datetime.now(tz=dt.UTC)
    signature = Webhook(SECRET).sign("msg_9", now, BODY.decode())
    headers = {
        "Webhook-Id": "msg_9",  # any case
        "Webhook-Timestamp": str(int(now.timestamp())),
        "Webhook-Signature": signature,
    }
    assert verify_webhook(BODY, headers, secret=SECRET)["status"] == "decided"


def test_our_signature_verifies_with_the_standardwebhooks_library():
    headers = headers_for(BODY)
    assert Webhook(SECRET).verify(BODY, headers)["id"] == "r-1"


def test_a_tampered_body_is_refused():
    headers = headers_for(BODY)
    with pytest.raises(WebhookVerificationError, match="signature"):
        verify_webhook(BODY.replace(b"decided", b"DECIDED"), headers, secret=SECRET)


def test_another_secret_is_refused():
    with pytest.raises(WebhookVerificationError, match="signature"):
        verify_webhook(BODY, headers_for(BODY, secret=OTHER), secret=SECRET)


@pytest.mark.parametrize("offset", [-301, 301, -3600])
def test_a_timestamp_more_than_five_minutes_away_is_refused(offset):
    headers = headers_for(BODY, at=time.time() + offset)
    with pytest.raises(WebhookVerificationError, match="timestamp"):
        verify_webhook(BODY, headers, secret=SECRET)


def test_five_minutes_exactly_is_still_accepted():
    headers = headers_for(BODY, at=1_000_000)
    assert verify_webhook(BODY, headers, secret=SECRET, now=1_000_300)["id"] == "r-1"


def test_one_matching_signature_among_several_is_enough():
    headers = headers_for(BODY)
    wrong = headers_for(BODY, secret=OTHER)["webhook-signature"]
    headers["webhook-signature"] = f"v1a,abc {wrong} {headers['webhook-signature']}"
    assert verify_webhook(BODY, headers, secret=SECRET)["id"] == "r-1"


def test_several_signatures_none_matching_are_refused():
    headers = headers_for(BODY)
    wrong = headers_for(BODY, secret=OTHER)["webhook-signature"]
    headers["webhook-signature"] = f"{wrong} {wrong}"
    with pytest.raises(WebhookVerificationError):
        verify_webhook(BODY, headers, secret=SECRET)


def test_a_right_digest_under_another_version_is_refused():
    headers = headers_for(BODY)
    headers["webhook-signature"] = headers["webhook-signature"].replace("v1,", "v2,")
    with pytest.raises(WebhookVerificationError):
        verify_webhook(BODY, headers, secret=SECRET)


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_missing_header_is_refused_by_name(missing):
    headers = headers_for(BODY)
    del headers[missing]
    with pytest.raises(WebhookVerificationError, match=missing):
        verify_webhook(BODY, headers, secret=SECRET)


def test_a_signed_body_that_is_not_a_json_object_is_refused():
    body = b"[1, 2]"
    with pytest.raises(WebhookVerificationError, match="object"):
        verify_webhook(body, headers_for(body), secret=SECRET)
