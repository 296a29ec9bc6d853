"""The outbox: email through Django's backend, webhooks with retries, backoff, final failure."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
import time_machine
from django.conf import settings
from django.core import mail
from prometheus_client import REGISTRY
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from approvals import notifications
from approvals.models import (
    ApprovalRequest,
    Notification,
    RiskTier,
    WebhookEndpoint,
    webhook_secret_new,
)
from approvals.notifications import notification_deliver
from approvals.services import approvals_sweep
from tests.support.approvals import decide, request_approval
from tests.support.queue import tasks_named

DELIVER = "approvals.tasks.notification_deliver"
DELIVER_MANY = "approvals.tasks.notifications_deliver"
T0 = dt.datetime(2030, 1, 1, 9, 0, tzinfo=dt.UTC)


class Hook:
    """A local webhook receiver that fails the first ``failures`` requests with 500."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.bodies: list[dict] = []
        self.requests: list[tuple[dict[str, str], bytes]] = []  # (headers, raw body)
        self.endpoint: WebhookEndpoint | None = None
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.bodies.append(json.loads(body))
                headers = {key.lower(): value for key, value in self.headers.items()}
                hook.requests.append((headers, body))
                failing = len(hook.bodies) <= hook.failures
                self.send_response(500 if failing else 200)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook_factory(demo_policy) -> Iterator:
    hooks: list[Hook] = []

    def make(failures: int) -> Hook:
        hook = Hook(failures)
        hooks.append(hook)
        hook.endpoint = WebhookEndpoint.objects.create(name=f"hook {len(hooks)}", url=hook.url)
        RiskTier.objects.filter(name="write").update(webhook_endpoint=hook.endpoint)
        return hook

    yield make
    for hook in hooks:
        hook.close()


def webhook_of(approval: ApprovalRequest, event: str = "request") -> Notification:
    return Notification.objects.get(
        approval=approval, event=event, channel=Notification.Channel.WEBHOOK
    )


def test_the_request_is_sent_by_email_and_as_a_slack_compatible_webhook(
    hook_factory, alice, queued, django_capture_on_commit_callbacks
):
    hook = hook_factory(failures=0)
    with django_capture_on_commit_callbacks(execute=True):
        approval = request_approval(requester=alice, tier="write")
    rows = Notification.objects.filter(approval=approval)
    # One task delivers all the rows the request's transaction wrote.
    (task,) = tasks_named(queued, DELIVER_MANY)
    assert set(task[1]) == set(rows.values_list("id", flat=True))

    for row in rows:
        assert notification_deliver(notification_id=row.id) == "sent"

    assert sorted(m.to[0] for m in mail.outbox) == ["bob@example.com", "carol@example.com"]
    assert "Approval needed: refund_order (write)" in mail.outbox[0].subject
    (body,) = hook.bodies
    assert body["text"].startswith("Approval needed: refund_order (write)")
    assert f"/approvals/{approval.id}/" in body["text"]
    assert (body["event"], body["approval_id"]) == ("request", approval.id)
    assert set(rows.values_list("status", flat=True)) == {"sent"}


def test_a_failing_webhook_is_retried_with_backoff_until_it_succeeds(hook_factory, alice, queued):
    hook = hook_factory(failures=2)
    with time_machine.travel(T0, tick=False) as clock:
        row = webhook_of(request_approval(requester=alice, tier="write"))

        assert notification_deliver(notification_id=row.id).startswith("retry in 30s")
        assert notification_deliver(notification_id=row.id) == "skipped: not due"
        clock.shift(dt.timedelta(seconds=30))
        queued.reset_mock()
        approvals_sweep()  # the sweep queues the due retry
        assert (DELIVER, row.id) in tasks_named(queued, DELIVER)
        assert notification_deliver(notification_id=row.id).startswith("retry in 60s")
        clock.shift(dt.timedelta(seconds=60))
        assert notification_deliver(notification_id=row.id) == "sent"

    row.refresh_from_db()
    assert (row.status, row.attempts, row.last_error) == ("sent", 3, "")
    assert len(hook.bodies) == 3


def test_a_webhook_that_keeps_failing_ends_failed_and_visible_in_the_admin(
    hook_factory, alice, bob, admin_client
):
    hook_factory(failures=1000)
    with time_machine.travel(T0, tick=False) as clock:
        approval = request_approval(requester=alice, tier="write")
        row = webhook_of(approval)
        results = []
        for _ in range(notifications.MAX_ATTEMPTS):
            results.append(notification_deliver(notification_id=row.id))
            clock.shift(dt.timedelta(hours=1))
        assert notification_deliver(notification_id=row.id) == "skipped: not due"

    assert results[-1].startswith("failed: HTTPError")
    row.refresh_from_db()
    assert row.status == Notification.Status.FAILED
    assert row.attempts == notifications.MAX_ATTEMPTS
    assert "500" in row.last_error
    page = admin_client.get("/admin/approvals/notification/", {"status__exact": "failed"})
    assert page.status_code == 200
    assert row.recipient in page.content.decode()
    # The decision never depended on it.
    assert decide(approval, bob).status == ApprovalRequest.Status.APPROVED


def test_an_unreachable_webhook_never_blocks_or_undoes_a_decision(
    demo_policy, alice, bob, queued, django_capture_on_commit_callbacks
):
    closed = WebhookEndpoint.objects.create(name="closed", url="http://127.0.0.1:9/closed")
    RiskTier.objects.filter(name="write").update(webhook_endpoint=closed)
    approval = request_approval(requester=alice, tier="write")

    with django_capture_on_commit_callbacks(execute=True):
        decided = decide(approval, bob)
    hook = webhook_of(approval, "decision")
    result = notification_deliver(notification_id=hook.id)

    assert result.startswith("retry in")
    decided.refresh_from_db()
    assert decided.status == ApprovalRequest.Status.APPROVED
    assert tasks_named(queued, "agents.tasks.run_advance")


def test_the_requester_is_told_about_the_decision(demo_policy, alice, bob):
    approval = request_approval(requester=alice, tier="write")
    decide(approval, bob, decision="reject", message="no")

    row = Notification.objects.get(approval=approval, event="decision", channel="email")
    assert row.recipient == "alice@example.com"
    assert notification_deliver(notification_id=row.id) == "sent"
    assert "bob chose reject" in mail.outbox[0].body


def test_without_tier_rows_nothing_is_sent(db, alice, bob):
    approval = request_approval(requester=alice, tier="write")
    decide(approval, bob)
    assert not Notification.objects.exists()


def delivered(hook: Hook, alice) -> tuple[Notification, dict[str, str], bytes]:
    """One request notification delivered to ``hook``: (row, headers, raw body) it received."""
    row = webhook_of(request_approval(requester=alice, tier="write"))
    assert notification_deliver(notification_id=row.id) == "sent"
    headers, body = hook.requests[-1]
    return row, headers, body


def test_a_receiver_verifies_the_webhook_signature_with_the_standard_webhooks_library(
    hook_factory, alice
):
    hook = hook_factory(failures=0)
    row, headers, body = delivered(hook, alice)

    payload = Webhook(hook.endpoint.secret).verify(body, headers)

    assert payload == row.payload
    assert headers["webhook-id"] == f"msg_{row.message_id.hex}"
    assert headers["webhook-signature"].startswith("v1,")
    assert hook.endpoint.secret.startswith("whsec_")


def test_a_tampered_body_or_a_stale_timestamp_fails_verification(hook_factory, alice):
    hook = hook_factory(failures=0)
    _, headers, body = delivered(hook, alice)
    receiver = Webhook(hook.endpoint.secret)

    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        receiver.verify(body.replace(b'"request"', b'"decision"'), headers)
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        receiver.verify(body, {**headers, "webhook-timestamp": str(int(time.time()) - 1)})
    later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=10)
    with time_machine.travel(later), pytest.raises(WebhookVerificationError, match="too old"):
        receiver.verify(body, headers)
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(webhook_secret_new()).verify(body, headers)


def test_every_retry_of_a_webhook_keeps_its_id_and_each_attempt_is_signed(hook_factory, alice):
    hook = hook_factory(failures=1)
    row = webhook_of(request_approval(requester=alice, tier="write"))
    other = webhook_of(request_approval(requester=alice, tier="write"))

    assert notification_deliver(notification_id=row.id).startswith("retry in")
    Notification.objects.filter(pk=row.pk).update(next_attempt_at=dt.datetime.now(dt.UTC))
    assert notification_deliver(notification_id=row.id) == "sent"
    assert notification_deliver(notification_id=other.id) == "sent"

    ids = [headers["webhook-id"] for headers, _ in hook.requests]
    assert ids[0] == ids[1] != ids[2]
    for headers, body in hook.requests:
        Webhook(hook.endpoint.secret).verify(body, headers)


def test_a_secret_rotated_in_the_admin_signs_the_next_request_and_the_old_one_no_longer_verifies(
    hook_factory, alice, admin_client
):
    hook = hook_factory(failures=0)
    old_secret = hook.endpoint.secret
    page = admin_client.get(f"/admin/approvals/webhookendpoint/{hook.endpoint.pk}/change/")
    assert old_secret in page.content.decode()

    response = admin_client.post(
        "/admin/approvals/webhookendpoint/",
        {"action": "rotate_secret", "_selected_action": [hook.endpoint.pk]},
    )
    assert response.status_code == 302
    hook.endpoint.refresh_from_db()
    _, headers, body = delivered(hook, alice)

    assert hook.endpoint.secret.startswith("whsec_") and hook.endpoint.secret != old_secret
    Webhook(hook.endpoint.secret).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(old_secret).verify(body, headers)


def test_an_inactive_endpoint_gets_no_webhooks(hook_factory, alice):
    hook = hook_factory(failures=0)
    WebhookEndpoint.objects.filter(pk=hook.endpoint.pk).update(is_active=False)

    approval = request_approval(requester=alice, tier="write")

    assert not approval.notifications.filter(channel=Notification.Channel.WEBHOOK).exists()


def docs_verifier() -> dict:
    """The Python block of docs/security.md's "Webhook signatures" section, executed."""
    text = (settings.BASE_DIR / "docs" / "security.md").read_text()
    section = text.split("## Webhook signatures", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "docs/security.md", "exec"), namespace)  # noqa: S102 - our own docs
    return namespace


def signed_at(secret: str, headers: dict, body: bytes, when: dt.datetime) -> dict:
    """``headers`` re-signed correctly, but at ``when`` (a replay of an old request)."""
    signature = Webhook(secret).sign(headers["webhook-id"], when, body.decode())
    return {
        **headers,
        "webhook-timestamp": str(int(when.timestamp())),
        "webhook-signature": signature,
    }


def test_the_verifier_in_the_security_docs_accepts_a_real_signed_request_and_refuses_a_forged_one(
    hook_factory, alice
):
    verify = docs_verifier()["verify"]
    hook = hook_factory(failures=0)
    row, headers, body = delivered(hook, alice)
    secret = hook.endpoint.secret

    assert verify(secret=secret, headers=headers, body=body) == row.payload
    for forged_headers, forged_body in (
        (headers, body + b" "),
        ({**headers, "webhook-id": "msg_other"}, body),
        ({**headers, "webhook-timestamp": str(int(time.time()) - 600)}, body),
        (signed_at(secret, headers, body, dt.datetime.now(dt.UTC) - dt.timedelta(minutes=6)), body),
    ):
        with pytest.raises(ValueError):
            verify(secret=secret, headers=forged_headers, body=forged_body)


def test_a_retry_goes_to_the_endpoints_current_url_not_the_one_it_had_when_the_row_was_written(
    hook_factory, alice
):
    # An admin moves an endpoint (its old URL leaked, or the receiver moved): the retries of
    # rows written before were still POSTed, freshly signed with the endpoint's live secret,
    # to the old URL, where whoever holds it can replay them to the new one for five minutes.
    old = hook_factory(failures=1)
    new = Hook(failures=0)
    try:
        row = webhook_of(request_approval(requester=alice, tier="write"))
        assert notification_deliver(notification_id=row.id).startswith("retry in")
        WebhookEndpoint.objects.filter(pk=old.endpoint.pk).update(url=new.url)
        Notification.objects.filter(pk=row.pk).update(next_attempt_at=dt.datetime.now(dt.UTC))

        assert notification_deliver(notification_id=row.id) == "sent"
    finally:
        new.close()

    assert len(old.requests) == 1
    assert len(new.requests) == 1


def test_the_docs_verifier_refuses_a_non_ascii_signature_with_valueerror_not_typeerror(
    hook_factory, alice
):
    # hmac.compare_digest raises TypeError on non-ASCII str: a receiver that catches the
    # documented ValueError answers a forged header with a 500 instead of a refusal.
    verify = docs_verifier()["verify"]
    hook = hook_factory(failures=0)
    _, headers, body = delivered(hook, alice)

    with pytest.raises(ValueError):
        verify(
            secret=hook.endpoint.secret,
            headers={**headers, "webhook-signature": "v1,\u00e9"},
            body=body,
        )


def test_a_staff_member_who_may_only_view_endpoints_can_neither_rotate_nor_read_the_secret(
    hook_factory,
):
    # An admin action without allowed_permissions is offered to whoever may view the list, and
    # a read-only field is shown to them: a view-only grant read the key that forges
    # signatures, and could rotate it, silently breaking every receiver.
    from tests.support.people import client_for, person

    hook = hook_factory(failures=0)
    secret = hook.endpoint.secret
    viewer = person("viewer", perms=["approvals.view_webhookendpoint"])
    viewer.is_staff = True
    viewer.save()
    page = client_for(viewer)

    shown = page.get(f"/admin/approvals/webhookendpoint/{hook.endpoint.pk}/change/")
    page.post(
        "/admin/approvals/webhookendpoint/",
        {"action": "rotate_secret", "_selected_action": [hook.endpoint.pk]},
    )

    hook.endpoint.refresh_from_db()
    assert hook.endpoint.secret == secret
    assert secret not in shown.content.decode()


def test_a_redirecting_receiver_gets_no_signed_request_without_its_body_and_the_row_is_not_sent(
    demo_policy, alice
):
    # urllib follows a 302 (an http -> https redirect, a moved receiver) by re-sending the
    # request as a GET without its body but with the webhook-* headers: the signature goes
    # (possibly to another host) with a request it does not sign, and the 200 of that GET
    # marked the notification sent although no receiver ever got it.
    seen: list[tuple[str, str, dict[str, str]]] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
            if self.path == "/hook":
                self.send_response(302)
                self.send_header("Location", "/elsewhere")
            else:
                self.send_response(200)
            self.end_headers()

        do_POST = do_GET = _answer  # noqa: N815 - http.server's names

        def log_message(self, *args) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = WebhookEndpoint.objects.create(
            name="moved", url=f"http://127.0.0.1:{server.server_port}/hook"
        )
        RiskTier.objects.filter(name="write").update(webhook_endpoint=endpoint)
        row = webhook_of(request_approval(requester=alice, tier="write"))
        outcome = notification_deliver(notification_id=row.id)
    finally:
        server.shutdown()
        server.server_close()

    assert [(method, path) for method, path, _ in seen] == [("POST", "/hook")]
    assert outcome != "sent"


def test_every_change_to_a_webhook_endpoint_in_the_admin_is_audited_without_its_secret(
    admin_client,
):
    """Invariant 3: an endpoint decides where decisions are sent and who can sign as the console;
    creating, changing, rotating and deleting one are audit events, which never hold the secret."""
    from audit.models import AuditEvent

    created = admin_client.post(
        "/admin/approvals/webhookendpoint/add/",
        {"name": "chat", "url": "https://hooks.example.com/a", "is_active": "on"},
    )
    assert created.status_code == 302
    endpoint = WebhookEndpoint.objects.get(name="chat")
    admin_client.post(
        f"/admin/approvals/webhookendpoint/{endpoint.pk}/change/",
        {"name": "chat", "url": "https://hooks.example.com/b", "is_active": "on"},
    )
    admin_client.post(
        "/admin/approvals/webhookendpoint/",
        {"action": "rotate_secret", "_selected_action": [endpoint.pk]},
    )
    endpoint.refresh_from_db()
    secret = endpoint.secret
    admin_client.post(f"/admin/approvals/webhookendpoint/{endpoint.pk}/delete/", {"post": "yes"})

    events = list(AuditEvent.objects.filter(action="webhook_endpoint.changed").order_by("seq"))
    assert [e.data["change"] for e in events] == ["created", "changed", "secret rotated", "deleted"]
    assert [e.data["state"]["url"] for e in events[:2]] == [
        "https://hooks.example.com/a",
        "https://hooks.example.com/b",
    ]
    assert all(e.actor_username == "admin" for e in events)
    assert not any(secret in e.canonical or "whsec_" in e.canonical for e in events)


# --- Prometheus: failed attempts are counted (core/prometheus.py) ---------------------------


def webhook_failures(outcome: str) -> float:
    labels = {"channel": "webhook", "outcome": outcome}
    return REGISTRY.get_sample_value("console_notification_failures_total", labels) or 0.0


def test_failed_webhook_attempts_count_as_retries_then_one_final_failure(hook_factory, alice):
    hook_factory(failures=1000)
    retried, failed = webhook_failures("retry"), webhook_failures("failed")
    with time_machine.travel(T0, tick=False) as clock:
        row = webhook_of(request_approval(requester=alice, tier="write"))
        for _ in range(notifications.MAX_ATTEMPTS):
            notification_deliver(notification_id=row.id)
            clock.shift(dt.timedelta(hours=1))
    assert webhook_failures("retry") - retried == notifications.MAX_ATTEMPTS - 1
    assert webhook_failures("failed") - failed == 1


def test_a_delivered_notification_counts_no_failure(hook_factory, alice):
    hook_factory(failures=0)
    retried, failed = webhook_failures("retry"), webhook_failures("failed")
    row = webhook_of(request_approval(requester=alice, tier="write"))
    assert notification_deliver(notification_id=row.id) == "sent"
    assert (webhook_failures("retry"), webhook_failures("failed")) == (retried, failed)
