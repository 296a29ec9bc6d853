"""The notification outbox: rows written in the event's transaction, delivered by a task.

Channels: email through Django's email backend, and a webhook (JSON POST with a
Slack-compatible ``text``, signed the Standard Webhooks way with the endpoint's secret: see
docs/security.md) configured per tier. Delivery retries with exponential backoff and
ends in ``failed`` after NOTIFICATION_MAX_ATTEMPTS; it never touches the approval itself, so
a failing channel cannot block or undo a decision.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import urllib.error
import urllib.request
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone
from django_q.tasks import async_task
from standardwebhooks.webhooks import Webhook

from approvals.models import (
    ApprovalRequest,
    Notification,
    RiskTier,
    WebhookEndpoint,
    webhook_secret_new,
)
from audit.services import event_record
from core.prometheus import notification_failure_count

log = logging.getLogger(__name__)

DELIVER_TASK = "approvals.tasks.notification_deliver"
# One task for the rows one transaction wrote (a request's approvers, a decision's requester).
DELIVER_MANY_TASK = "approvals.tasks.notifications_deliver"
MAX_ATTEMPTS = getattr(settings, "NOTIFICATION_MAX_ATTEMPTS", 5)
BACKOFF_BASE_SECONDS = 30
BACKOFF_MAX_SECONDS = 3600
# A claimed delivery is not picked up again for this long (the task's own time budget).
CLAIM_SECONDS = 120
WEBHOOK_TIMEOUT_SECONDS = 10

Event = Notification.Event


def approval_url(approval: ApprovalRequest) -> str:
    return f"{settings.CONSOLE_BASE_URL.rstrip('/')}/approvals/{approval.pk}/"


def _text(*, approval: ApprovalRequest, event: str, detail: str) -> tuple[str, str]:
    """(subject, Slack-compatible text) for one event."""
    what = f"{approval.tool} ({approval.tier}) for run {str(approval.run_id)[:8]}"
    subject = {
        Event.REQUEST: f"Approval needed: {what}",
        Event.REMINDER: f"Reminder: approval of {what} expires soon",
        Event.ESCALATION: f"Escalated: approval of {what}",
        Event.EXPIRY: f"Expired: approval of {what}",
        Event.DECISION: f"Decided: approval of {what}",
    }[event]
    text = (
        f"{subject}. {detail}".strip()
        + f"\n<{approval_url(approval)}|Open approval #{approval.pk}>"
    )
    return subject[:200], text


def _emails(*, groups: Q | None, exclude_user_id: int | None) -> list[str]:
    """The active members' addresses of the groups ``groups`` matches (on the user's groups)."""
    if groups is None:
        return []
    users = get_user_model().objects.filter(groups, is_active=True).exclude(email="")
    if exclude_user_id is not None:
        users = users.exclude(pk=exclude_user_id)
    return sorted(set(users.values_list("email", flat=True)))


def _recipients(*, approval: ApprovalRequest, tier: RiskTier, event: str) -> list[str]:
    requester_id = approval.run.requested_by_id
    if event in (Event.EXPIRY, Event.DECISION):
        email = approval.run.requested_by.email
        return [email] if email else []
    if event == Event.ESCALATION:
        escalation = Q(groups=tier.escalation_group_id) if tier.escalation_group_id else None
        return _emails(groups=escalation, exclude_user_id=requester_id)
    # The tier's approver groups as a subquery: the addresses in one round trip.
    approvers = RiskTier.approver_groups.through.objects.filter(risktier_id=tier.pk)
    groups = Q(groups__in=approvers.values("group_id"))
    if event == Event.REMINDER and approval.escalated_at and tier.escalation_group_id:
        groups |= Q(groups=tier.escalation_group_id)
    return _emails(groups=groups, exclude_user_id=requester_id)


def message_payload(*, approval: ApprovalRequest, event: str, text: str) -> dict[str, Any]:
    """The JSON a webhook receives for one event of one approval (and the e-mail's record)."""
    return {
        "text": text,
        "event": event,
        "approval_id": approval.pk,
        "run_id": str(approval.run_id),
        "tool": approval.tool,
        "tier": approval.tier,
        "status": approval.status,
        "expires_at": approval.expires_at.isoformat(),
        "url": approval_url(approval),
    }


def notifications_create(
    *, approval: ApprovalRequest, event: str, tier: RiskTier | None, detail: str = ""
) -> list[Notification]:
    """Outbox rows for one event (call inside the event's transaction); queued on commit.

    A tier without a RiskTier row has no notification settings, so nothing is sent.
    """
    if tier is None:
        return []
    subject, text = _text(approval=approval, event=event, detail=detail)
    now = timezone.now()
    payload = message_payload(approval=approval, event=event, text=text)
    rows: list[Notification] = []
    if tier.email_notifications:
        for email in _recipients(approval=approval, tier=tier, event=event):
            rows.append(
                Notification(
                    event=event,
                    channel=Notification.Channel.EMAIL,
                    recipient=email,
                    subject=subject,
                    text=text,
                    payload=payload,
                    approval=approval,
                    next_attempt_at=now,
                )
            )
    endpoint = tier.webhook_endpoint
    if endpoint is not None and endpoint.is_active:
        rows.append(
            Notification(
                event=event,
                channel=Notification.Channel.WEBHOOK,
                recipient=endpoint.url,
                endpoint=endpoint,
                subject=subject,
                text=text,
                payload=payload,
                approval=approval,
                next_attempt_at=now,
            )
        )
    if rows:
        Notification.objects.bulk_create(rows)  # one INSERT; both databases return the ids
    for row in rows:
        notification_deliver_enqueue(notification_id=row.pk)
    return rows


def notification_deliver_enqueue(*, notification_id: int) -> None:
    """Queue the row's delivery on commit, in the one task of its transaction's rows."""
    notifications_deliver_enqueue(notification_ids=[notification_id])


def notifications_deliver_enqueue(*, notification_ids: list[int]) -> None:
    """Queue these rows' delivery once the current transaction commits: ONE task
    (``DELIVER_MANY_TASK``) for all the rows a transaction wrote, however many calls add to it.

    The ids gather on the connection next to an on-commit callback registered with the first of
    them; the gathering lapses exactly when that callback does (commit, rollback, or the rollback
    of the savepoint it was registered in), as audit's head memo does. Outside a transaction the
    task is queued at once. Each row is still claimed on its own when it is delivered, and an
    undelivered row is retried by the sweep: a lost task loses no notification.
    """
    if not notification_ids:
        return
    if not connection.in_atomic_block:
        async_task(DELIVER_MANY_TASK, list(notification_ids), group="notifications")
        return
    memo = getattr(connection, "_notifications_queued", None)
    if memo is not None and any(entry[1] is memo[0] for entry in connection.run_on_commit):
        memo[1].extend(notification_ids)
        return
    ids = list(notification_ids)

    def queue() -> None:
        connection._notifications_queued = None
        async_task(DELIVER_MANY_TASK, ids, group="notifications")

    transaction.on_commit(queue)
    connection._notifications_queued = (queue, ids)


def notification_deliver_later(*, notification_id: int) -> None:
    """Queue a delivery now (outside any transaction: the sweep's retries)."""
    async_task(DELIVER_TASK, notification_id, group="notifications")


def backoff_seconds(attempts: int) -> int:
    """Delay before the next attempt after ``attempts`` failed ones: 30 s, 60 s, 120 s ..."""
    return min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2 ** max(0, attempts - 1))


def notification_deliver(*, notification_id: int) -> str:
    """Deliver one notification if it is due; returns what happened (for logs and tests).

    The claim is a conditional update (pending, due) that pushes ``next_attempt_at`` ahead,
    so the on-commit task and a sweep retry never deliver the same row at once.
    """
    now = timezone.now()
    claimed = Notification.objects.filter(
        pk=notification_id, status=Notification.Status.PENDING, next_attempt_at__lte=now
    ).update(
        attempts=F("attempts") + 1,
        next_attempt_at=now + dt.timedelta(seconds=CLAIM_SECONDS),
    )
    if not claimed:
        return "skipped: not due"
    row = Notification.objects.get(pk=notification_id)
    try:
        _send(row)
    except Exception as exc:  # noqa: BLE001 - any channel failure is recorded, never raised
        error = f"{type(exc).__name__}: {exc}"[:2000]
        notification_failure_count(channel=row.channel, final=row.attempts >= MAX_ATTEMPTS)
        if row.attempts >= MAX_ATTEMPTS:
            Notification.objects.filter(pk=row.pk).update(
                status=Notification.Status.FAILED, last_error=error
            )
            log.warning("notification %s failed for good: %s", row.pk, error)
            return f"failed: {error}"
        delay = backoff_seconds(row.attempts)
        Notification.objects.filter(pk=row.pk).update(
            last_error=error, next_attempt_at=timezone.now() + dt.timedelta(seconds=delay)
        )
        return f"retry in {delay}s: {error}"
    Notification.objects.filter(pk=row.pk).update(
        status=Notification.Status.SENT, sent_at=timezone.now(), last_error=""
    )
    return "sent"


def _deliver_many_budget() -> float:
    """Seconds a batch task may keep starting sends: one more send (up to
    WEBHOOK_TIMEOUT_SECONDS) still ends well inside the task timeout (Q_TIMEOUT)."""
    return max(0.0, settings.Q_TIMEOUT / 2 - WEBHOOK_TIMEOUT_SECONDS)


def notifications_deliver(*, notification_ids: list[int]) -> dict[str, int]:
    """Deliver each of the rows in turn (``notification_deliver``: claimed one by one, so a
    re-delivered task or a sweep retry never sends a row twice at once); counts by outcome.

    A deadline well below the task timeout: once it passed, the rows not yet started go on in
    a new task (a task killed mid-send would leave its row to be sent again)."""
    outcomes: dict[str, int] = {}
    ids = list(dict.fromkeys(notification_ids))
    started = timezone.now()
    budget = _deliver_many_budget()
    for index, notification_id in enumerate(ids):
        if index and (timezone.now() - started).total_seconds() > budget:
            async_task(DELIVER_MANY_TASK, ids[index:], group="notifications")
            outcomes["requeued"] = len(ids) - index
            break
        outcome = notification_deliver(notification_id=notification_id).split(":")[0]
        outcome = outcome.split(" in ")[0]  # "retry in 30s" -> "retry"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes


def _send(row: Notification) -> None:
    if row.channel == Notification.Channel.EMAIL:
        send_mail(
            row.subject,
            row.text,
            settings.DEFAULT_FROM_EMAIL,
            [row.recipient],
            fail_silently=False,
        )
        return
    body = json.dumps(row.payload or {"text": row.text}).encode()
    headers = webhook_headers(row, body=body, now=timezone.now())
    # The endpoint's URL now, not the one the row was written for: the live secret signs it,
    # so a URL the admin moved away from must not receive freshly signed requests.
    url = row.endpoint.url
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


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx is an answer, not a delivery: urllib would re-send a POST as a GET without its
    body but with the webhook-* headers (to wherever Location points). Refused: an HTTPError,
    retried, then failed in the admin, where the endpoint's URL can be corrected."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, PLR0913
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


class WebhookEndpointUnavailable(Exception):
    """Recorded as the delivery's error (retried, then failed), never raised to a caller."""


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
    decisions are sent, never the secret that signs them. Call it in the change's transaction."""
    event_record(
        action="webhook_endpoint.changed",
        actor=actor,
        data={
            "change": change,
            "state": {"name": endpoint.name, "url": endpoint.url, "is_active": endpoint.is_active},
        },
        request=request,
    )


def notifications_due(*, now: dt.datetime, limit: int) -> list[int]:
    """Ids of pending notifications whose next attempt is due (indexed, bounded).

    A fresh row belongs to the task queued when it was written; the sweep takes it only once
    that task had CLAIM_SECONDS to run (it may have been lost with its worker).
    """
    fresh = now - dt.timedelta(seconds=CLAIM_SECONDS)
    return list(
        Notification.objects.filter(status=Notification.Status.PENDING, next_attempt_at__lte=now)
        .filter(Q(attempts__gt=0) | Q(created_at__lte=fresh))
        .order_by("next_attempt_at", "id")
        .values_list("id", flat=True)[:limit]
    )


def notification_retry(*, notification_id: int) -> None:
    """An administrator's retry: back to pending with fresh attempts, queued on commit."""
    with transaction.atomic():
        Notification.objects.filter(pk=notification_id).update(
            status=Notification.Status.PENDING,
            attempts=0,
            next_attempt_at=timezone.now(),
        )
        notification_deliver_enqueue(notification_id=notification_id)
