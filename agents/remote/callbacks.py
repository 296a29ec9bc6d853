"""Callbacks: the decided (or cancelled) request POSTed to the agent, signed with its secret.

They go through the notification outbox (retries with backoff, ``failed`` in the admin), as a
Notification of event ``callback`` on the agent's own WebhookEndpoint (kind standard, its
secret the agent's ``callback_secret``): Standard Webhooks headers, as for any endpoint.

SSRF: a request's own callback URL must have the scheme, host and port of the agent's
registered one (checked when opened, and again at each delivery); with none registered, a
request may name none. No URL with user info or a backslash, here or registered
(``webhook_url_problem``): urllib would call another host than the one checked.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.utils import timezone

from agents.remote.bodies import CALLBACK_TYPE, remote_request_body
from agents.remote.errors import RemoteRequestInvalid
from agents.remote.models import ExternalAgent, RemoteRequest
from approvals.models import Notification
from approvals.notification_webhooks import same_origin, webhook_url_problem
from approvals.notifications import notification_deliver_enqueue


def callback_url_check(*, agent: ExternalAgent, url: str) -> str:
    """A request's callback URL, if allowed (same origin as the agent's registered one)."""
    if not url:
        return ""
    try:
        URLValidator(schemes=["http", "https"])(url)
    except ValidationError:
        raise RemoteRequestInvalid(
            "callback_url is not an http(s) URL.", errors={"callback_url": "not an http(s) URL"}
        ) from None
    problem = webhook_url_problem(url)
    if problem:
        raise RemoteRequestInvalid(f"callback_url {problem}.", errors={"callback_url": problem})
    if not agent.callback_url:
        raise RemoteRequestInvalid(
            "This agent has no registered callback URL: a request may not name one.",
            errors={"callback_url": "the agent has no registered callback URL"},
        )
    if not same_origin(url, agent.callback_url):
        raise RemoteRequestInvalid(
            "callback_url must have the scheme, host and port of the agent's registered URL.",
            errors={"callback_url": f"must be on {_origin(agent.callback_url)}"},
        )
    return url


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def callback_write(*, remote: RemoteRequest) -> Notification | None:
    """The outbox row of a closed request's callback (in the caller's transaction), queued on
    commit; None when neither the request nor the agent has a callback URL."""
    agent = remote.agent
    url = remote.callback_url or agent.callback_url
    if not url or agent.endpoint_id is None:
        return None
    body: dict[str, Any] = {"type": CALLBACK_TYPE, **remote_request_body(remote=remote)}
    row = Notification.objects.create(
        event=Notification.Event.CALLBACK,
        channel=Notification.Channel.WEBHOOK,
        recipient=url,
        endpoint_id=agent.endpoint_id,
        subject=f"Approval request {remote.id} {remote.status}"[:200],
        text=f"{agent.run_agent}: request {remote.interrupt_id} of thread {remote.thread_id}"
        f" is {remote.status}.",
        payload=body,
        next_attempt_at=timezone.now(),
    )
    notification_deliver_enqueue(notification_id=row.pk)
    return row
