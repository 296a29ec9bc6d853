"""Webhook delivery: the signed POST of one notification (Standard Webhooks headers; a Slack
endpoint gets a Block Kit message), and the audited changes to an endpoint."""

from __future__ import annotations

import datetime as dt
import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from approvals.models import Notification, WebhookEndpoint, webhook_secret_new
from approvals.slack import slack_message
from audit.services import event_record

WEBHOOK_TIMEOUT_SECONDS = 10


class WebhookEndpointUnavailable(Exception):
    """Recorded as the delivery's error (retried, then failed), never raised to a caller."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx is an answer, not a delivery: urllib would re-send a POST as a GET without its
    body but with the webhook-* headers (to wherever Location points). Refused: an HTTPError,
    retried, then failed in the admin, where the endpoint's URL can be corrected."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, PLR0913
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)
# Public: the one opener for URLs from outside (Slack's response_url too).
NO_REDIRECT_OPENER = _OPENER


def webhook_url_problem(url: str) -> str:
    """Why ``url`` may not be called ("" if it may): user info (``user:pass@``, which urllib
    does not read as urlsplit does), a backslash (``evil\\@good``: one host for urlsplit,
    another for urllib), whitespace or a control character. The host urlsplit reads must be
    the one urllib connects to, or no origin check means anything."""
    if "\\" in url:
        return "contains a backslash"
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        return "contains whitespace or a control character"
    if "@" in urlsplit(url).netloc:
        return "has user info (user:password@): not allowed"
    return ""


def webhook_url_validate(url: str) -> None:
    """A form validator: ``webhook_url_problem`` as a ValidationError."""
    problem = webhook_url_problem(url or "")
    if problem:
        raise ValidationError(f"This URL {problem}.", code="unsafe_url")


def same_origin(url: str, other: str) -> bool:
    """Same scheme, host and port (the default port of the scheme when none is written);
    never for a URL with user info or a backslash (``webhook_url_problem``)."""
    if webhook_url_problem(url) or webhook_url_problem(other):
        return False
    a, b = urlsplit(url), urlsplit(other)
    try:
        ports = (a.port or _PORTS.get(a.scheme), b.port or _PORTS.get(b.scheme))
    except ValueError:  # a port out of range
        return False
    return bool(a.hostname) and (a.scheme, a.hostname, ports[0]) == (b.scheme, b.hostname, ports[1])


_PORTS = {"http": 80, "https": 443}


def webhook_body(row: Notification) -> bytes:
    """What the endpoint receives: the row's JSON, or for Slack its Block Kit message."""
    endpoint = row.endpoint
    if endpoint is not None and endpoint.kind == WebhookEndpoint.Kind.SLACK:
        return json.dumps(slack_message(row=row, endpoint=endpoint)).encode()
    return json.dumps(row.payload or {"text": row.text}).encode()


def webhook_post(row: Notification) -> None:
    """POST one webhook notification; raises on anything but a 2xx answer."""
    if row.endpoint is None or not row.endpoint.is_active:
        raise WebhookEndpointUnavailable("the webhook endpoint was removed or deactivated")
    body = webhook_body(row)
    headers = webhook_headers(row, body=body, now=timezone.now())
    # The endpoint's URL now, not the one the row was written for: the live secret signs it,
    # so a URL the admin moved away from must not receive freshly signed requests.
    url = row.endpoint.url
    if webhook_url_problem(url):
        raise WebhookEndpointUnavailable(f"the endpoint's URL {webhook_url_problem(url)}")
    if row.event == Notification.Event.CALLBACK:
        # An external agent's callback goes to its request's URL, on the origin registered now.
        if not same_origin(row.recipient, url):
            raise WebhookEndpointUnavailable("the callback URL is not on the agent's origin now")
        url = row.recipient
    request = urllib.request.Request(
        url,
        data=body,
        headers={
            "Content-Type": "application/json",
            "User-Agent": "approval-console",
            **headers,
        },
        method="POST",
    )
    with _OPENER.open(request, timeout=WEBHOOK_TIMEOUT_SECONDS) as response:  # admin-configured URL
        status = response.status
    if not 200 <= status < 300:
        raise urllib.error.HTTPError(url, status, "unexpected status", None, None)


def webhook_headers(row: Notification, *, body: bytes, now: dt.datetime) -> dict[str, str]:
    """Standard Webhooks headers signing exactly ``body`` with the endpoint's current secret.

    ``webhook-id`` is the row's message id, the same on every retry; the timestamp is the
    attempt's, so a receiver can refuse stale (replayed) requests.
    """
    endpoint = row.endpoint
    if endpoint is None or not endpoint.is_active:
        raise WebhookEndpointUnavailable("the webhook endpoint was removed or deactivated")
    msg_id = f"msg_{row.message_id.hex}"
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(endpoint.secret).sign(msg_id, now, body.decode()),
    }


def webhook_endpoint_secret_rotate(
    *, endpoint: WebhookEndpoint, actor: Any, request: Any = None
) -> str:
    """A new signing secret; pending retries are signed with it from their next attempt."""
    with transaction.atomic():
        endpoint.secret = webhook_secret_new()
        endpoint.save(update_fields=["secret"])
        webhook_endpoint_change_record(
            endpoint=endpoint, change="secret rotated", actor=actor, request=request
        )
    return endpoint.secret


def webhook_endpoint_change_record(
    *, endpoint: WebhookEndpoint, change: str, actor: Any, request: Any = None
) -> None:
    """Audit "webhook_endpoint.changed" (created, changed, secret rotated, deleted): where
    decisions are sent, never the secrets that sign them (nor Slack's signing secret)."""
    event_record(
        action="webhook_endpoint.changed",
        actor=actor,
        data={
            "change": change,
            "state": {
                "name": endpoint.name,
                "url": endpoint.url,
                "is_active": endpoint.is_active,
                "kind": endpoint.kind,
            },
        },
        request=request,
    )
