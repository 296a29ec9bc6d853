"""Slack: the Block Kit message a Slack endpoint receives, the signed values of its buttons,
and the verification of the requests Slack sends back when a button is pressed
(https://api.slack.com/authentication/verifying-requests-from-slack). See docs/security.md.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from django.core import signing

from approvals.contract import is_console_payload
from approvals.models import ApprovalRequest, Notification, WebhookEndpoint
from approvals.notification_text import DECIDING_EVENTS

SALT = "approvals.slack-action"
# Slack's own rule: a request older (or newer) than this is refused as a possible replay.
MAX_SKEW_SECONDS = 300
# What a button press's body can need (Slack's payload of one message), with room to spare.
MAX_BODY_BYTES = 64 * 1024
BUTTONS = {
    ApprovalRequest.Decision.APPROVE: ("Approve", "primary"),
    ApprovalRequest.Decision.REJECT: ("Reject", "danger"),
}


def _salt(endpoint_id: int) -> str:
    # One endpoint's buttons are worth nothing at another's interactions URL.
    return f"{SALT}:{endpoint_id}"


def slack_action_value(
    *, endpoint_id: int, approval_id: int, payload_hash: str, decision: str
) -> str:
    """A button's value: the approval, the version of its action and the decision, signed."""
    value = {"a": approval_id, "h": payload_hash, "d": decision}
    return signing.dumps(value, salt=_salt(endpoint_id))


def slack_action_read(*, endpoint_id: int, value: Any) -> tuple[int, str, str]:
    """(approval id, payload hash, decision) of a button's value; BadSignature if forged."""
    if not isinstance(value, str):
        raise signing.BadSignature("not a signed value")
    data = signing.loads(value, salt=_salt(endpoint_id))
    try:
        return int(data["a"]), str(data["h"]), str(data["d"])
    except (TypeError, KeyError, ValueError):
        raise signing.BadSignature("not a button value") from None


def slack_decisions(approval: ApprovalRequest) -> list[str]:
    """The buttons the approval allows: approve and reject, for an action the console shows
    (a payload it does not recognise can only be answered in words, on its page)."""
    if not approval.is_pending or not is_console_payload(approval.payload):
        return []
    allowed = approval.allowed_decisions or ApprovalRequest.Decision.values
    return [decision for decision in BUTTONS if decision in allowed]


def slack_message(*, row: Notification, endpoint: WebhookEndpoint) -> dict[str, Any]:
    """The Block Kit message for one notification; ``text`` stays as the fallback. It names the
    action but carries none of its arguments: personal data stays in the console."""
    payload = row.payload or {}
    text = payload.get("text") or row.text
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}
    ]
    approval = row.approval
    elements: list[dict[str, Any]] = []
    if approval is not None and row.event in DECIDING_EVENTS:
        payload_hash = payload.get("payload_hash", "")
        if payload_hash == approval.payload_hash:  # buttons only for the version still asked
            for decision in slack_decisions(approval):
                label, style = BUTTONS[decision]
                elements.append(
                    {
                        "type": "button",
                        "action_id": decision,
                        "text": {"type": "plain_text", "text": label},
                        "style": style,
                        "value": slack_action_value(
                            endpoint_id=endpoint.pk,
                            approval_id=approval.pk,
                            payload_hash=payload_hash,
                            decision=decision,
                        ),
                    }
                )
    if payload.get("url"):
        elements.append(
            {
                "type": "button",
                "action_id": "open",
                "text": {"type": "plain_text", "text": "Open"},
                "url": payload["url"],
            }
        )
    if elements:
        block_id = f"approval-{approval.pk}" if approval is not None else "approval"
        blocks.append({"type": "actions", "block_id": block_id, "elements": elements})
    return {"text": text, "blocks": blocks}


def slack_signature(*, secret: str, timestamp: str, body: bytes) -> str:
    """``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{body}``, as Slack signs."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def slack_request_verified(
    *, secret: str, timestamp: str, signature: str, body: bytes, now: float
) -> bool:
    """Slack's signature over exactly ``body``, made within MAX_SKEW_SECONDS of ``now``."""
    if (
        not secret
        or not (timestamp.isascii() and timestamp.isdigit())
        or abs(now - int(timestamp)) > MAX_SKEW_SECONDS
    ):
        return False
    expected = slack_signature(secret=secret, timestamp=timestamp, body=body)
    return hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace"))
