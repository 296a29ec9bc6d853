"""The notification outbox: rows written in the event's transaction, delivered by a task.

Channels: email through Django's email backend (an approver's carries a signed decision link:
approvals/links.py), and a webhook (JSON POST with a Slack-compatible ``text``, or a Block Kit
message for a Slack endpoint, signed the Standard Webhooks way with the endpoint's secret: see
approvals/notification_webhooks.py and docs/security.md) configured per tier. What a message
says and to whom is approvals/notification_text.py. Delivery retries with exponential backoff and
ends in ``failed`` after NOTIFICATION_MAX_ATTEMPTS; it never touches the approval itself, so
a failing channel cannot block or undo a decision.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.core.mail import send_mail
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone
from django_q.tasks import async_task

from approvals.links import decision_link_text, decision_links_create
from approvals.models import ApprovalRequest, Notification, RiskTier

# Re-exported: callers (the admin, tests) import these from here.
from approvals.notification_text import (  # noqa: F401
    Recipient,
    approval_url,
    message_payload,
    message_text,
    recipients,
)
from approvals.notification_webhooks import (  # noqa: F401
    WEBHOOK_TIMEOUT_SECONDS,
    WebhookEndpointUnavailable,
    webhook_endpoint_change_record,
    webhook_endpoint_secret_rotate,
    webhook_headers,
    webhook_post,
)
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

Event = Notification.Event


def notifications_create(
    *, approval: ApprovalRequest, event: str, tier: RiskTier | None, detail: str = ""
) -> list[Notification]:
    """Outbox rows for one event (call inside the event's transaction); queued on commit.

    A tier without a RiskTier row has no notification settings, so nothing is sent. An
    approver's e-mail asking for a decision gets a DecisionLink row (its token is made when
    the e-mail is sent: approvals/links.py).
    """
    if tier is None:
        return []
    subject, text = message_text(approval=approval, event=event, detail=detail)
    now = timezone.now()
    payload = message_payload(approval=approval, event=event, text=text)
    rows: list[tuple[Notification, int | None]] = []
    if tier.email_notifications:
        for email, user_id in recipients(approval=approval, tier=tier, event=event):
            row = Notification(
                event=event,
                channel=Notification.Channel.EMAIL,
                recipient=email,
                subject=subject,
                text=text,
                payload=payload,
                approval=approval,
                next_attempt_at=now,
            )
            rows.append((row, user_id))
    endpoint = tier.webhook_endpoint
    if endpoint is not None and endpoint.is_active:
        row = Notification(
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
        rows.append((row, None))
    if rows:
        # One INSERT; both databases return the ids.
        Notification.objects.bulk_create([row for row, _ in rows])
        decision_links_create(rows)
    for row, _ in rows:
        notification_deliver_enqueue(notification_id=row.pk)
    return [row for row, _ in rows]


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
            row.text + decision_link_text(row),
            settings.DEFAULT_FROM_EMAIL,
            [row.recipient],
            fail_silently=False,
        )
        return
    webhook_post(row)


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
