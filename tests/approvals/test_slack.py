"""Slack: the Block Kit message of a Slack endpoint, and button presses signed exactly as Slack
signs them (v0 HMAC-SHA256 of "v0:{timestamp}:{body}" with the app's signing secret)."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from urllib.parse import urlencode

import pytest
import time_machine
from django.test import Client
from django.urls import reverse

from approvals.models import (
    ApprovalRequest,
    Notification,
    RiskTier,
    SlackIdentity,
    WebhookEndpoint,
)
from approvals.notifications import notification_deliver
from approvals.services import slack as slack_services
from approvals.services.slack import RESPOND_TASK, slack_respond
from audit.models import AuditEvent
from tests.support.approvals import request_approval
from tests.support.queue import NOTIFICATION_MODULES, RUNNER_MODULES, tasks_named

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TEAM = "T0001"
RESPONSE_URL = "https://hooks.slack.com/actions/T0001/1234/abcd"


@pytest.fixture
def queue_modules():
    """Notification deliveries and Slack answers are recorded, never run."""
    return (*RUNNER_MODULES, *NOTIFICATION_MODULES, slack_services)


class Receiver:
    """A local HTTP server recording each JSON body POSTed to it."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.bodies.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def slack(demo_policy, receiver, bob, dave) -> WebhookEndpoint:
    """Tier "write" notifies a Slack endpoint; bob and dave are mapped Slack users."""
    endpoint = WebhookEndpoint.objects.create(
        name="slack", url=receiver.url, kind="slack", slack_signing_secret=SECRET
    )
    RiskTier.objects.filter(name="write").update(webhook_endpoint=endpoint)
    SlackIdentity.objects.create(team_id=TEAM, slack_user_id="U_BOB", user=bob)
    SlackIdentity.objects.create(team_id=TEAM, slack_user_id="U_DAVE", user=dave)
    return endpoint


@pytest.fixture
def waiting(slack, alice) -> ApprovalRequest:
    return request_approval(requester=alice, tier="write")


def slack_message_of(approval: ApprovalRequest, receiver: Receiver) -> dict[str, Any]:
    row = approval.notifications.get(event="request", channel=Notification.Channel.WEBHOOK)
    assert notification_deliver(notification_id=row.pk) == "sent"
    return receiver.bodies[-1]


def buttons(message: dict[str, Any]) -> dict[str, dict[str, Any]]:
    actions = [b for b in message["blocks"] if b["type"] == "actions"]
    return {e["action_id"]: e for block in actions for e in block["elements"]}


def press(
    endpoint: WebhookEndpoint,
    value: str,
    *,
    action: str = "approve",
    user: str = "U_BOB",
    secret: str = SECRET,
    timestamp: int | None = None,
    offset: int = 0,
    signature: str | None = None,
) -> Any:
    """POST a block_actions payload the way Slack does: form-encoded, signed v0."""
    payload = {
        "type": "block_actions",
        "team": {"id": TEAM, "domain": "example"},
        "user": {"id": user, "username": user.lower(), "team_id": TEAM},
        "api_app_id": "A0001",
        "response_url": RESPONSE_URL,
        "actions": [
            {
                "action_id": action,
                "block_id": "approval",
                "type": "button",
                "value": value,
                "action_ts": "1700000000.000100",
            }
        ],
    }
    body = urlencode({"payload": json.dumps(payload)})
    ts = str((int(time.time()) if timestamp is None else timestamp) + offset)
    base = f"v0:{ts}:{body}".encode()
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return Client().post(
        reverse("approvals:slack-interactions", args=[endpoint.pk]),
        data=body,
        content_type="application/x-www-form-urlencoded",
        headers={
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": f"v0={digest}" if signature is None else signature,
        },
    )


def status_of(approval: ApprovalRequest) -> str:
    approval.refresh_from_db()
    return approval.status


def test_a_slack_endpoint_gets_a_block_kit_message_with_approve_reject_and_open(waiting, receiver):
    message = slack_message_of(waiting, receiver)

    assert message["text"].startswith("Approval needed: refund_order (write)")  # the fallback
    assert message["blocks"][0]["text"]["text"] == message["text"]
    found = buttons(message)
    assert list(found) == ["approve", "reject", "open"]
    assert (found["approve"]["style"], found["reject"]["style"]) == ("primary", "danger")
    assert found["open"]["url"].endswith(f"/approvals/{waiting.pk}/")
    assert "A-1" not in json.dumps(message)  # the arguments stay in the console


def test_only_the_decisions_the_approval_allows_are_offered(slack, alice, receiver):
    only_approve = request_approval(requester=alice, tier="write")
    ApprovalRequest.objects.filter(pk=only_approve.pk).update(
        allowed_decisions=["approve", "respond"]
    )
    unknown = request_approval(requester=alice, tier="write")
    unknown.payload = {"question": "?"}  # a payload the console does not recognise
    unknown.save(update_fields=["payload"])

    assert list(buttons(slack_message_of(only_approve, receiver))) == ["approve", "open"]
    assert list(buttons(slack_message_of(unknown, receiver))) == ["open"]


def test_a_signed_approve_decides_updates_the_message_and_answers_the_response_url(
    waiting, receiver, slack, queued, django_capture_on_commit_callbacks
):
    value = buttons(slack_message_of(waiting, receiver))["approve"]["value"]

    with django_capture_on_commit_callbacks(execute=True):
        response = press(slack, value)

    assert response.status_code == 200
    answer = response.json()
    assert answer["replace_original"] is True
    assert answer["text"].startswith("Approved by bob at ")
    assert status_of(waiting) == ApprovalRequest.Status.APPROVED
    voted = AuditEvent.objects.get(action="approval.voted", approval_id=waiting.pk)
    assert (voted.actor_username, voted.data["via"]) == ("bob", "slack")
    assert tasks_named(queued, RESPOND_TASK) == [(RESPOND_TASK, RESPONSE_URL, answer)]


def test_a_signed_reject_decides(waiting, receiver, slack):
    value = buttons(slack_message_of(waiting, receiver))["reject"]["value"]

    answer = press(slack, value, action="reject").json()

    assert answer["text"].startswith("Rejected by bob at ")
    assert status_of(waiting) == ApprovalRequest.Status.REJECTED


@pytest.mark.parametrize(
    "how",
    [
        {"offset": -360},  # stale (well past the 5 minutes: a slow machine must not matter)
        {"offset": 360},  # from the future
        {"signature": "v0=" + "0" * 64},  # forged
        {"secret": "another-apps-secret"},  # wrong secret
        {"signature": ""},
    ],
    ids=["stale", "future", "forged", "wrong-secret", "unsigned"],
)
def test_a_forged_or_stale_request_gets_401_and_changes_nothing(
    waiting, receiver, slack, queued, how
):
    value = buttons(slack_message_of(waiting, receiver))["approve"]["value"]

    response = press(slack, value, **how)

    assert response.status_code == 401
    assert status_of(waiting) == ApprovalRequest.Status.PENDING
    assert tasks_named(queued, RESPOND_TASK) == []


def test_a_request_signed_five_minutes_ago_is_still_taken_and_not_later(waiting, receiver, slack):
    value = buttons(slack_message_of(waiting, receiver))["approve"]["value"]
    signed_at = int(time.time())

    with time_machine.travel(dt.datetime.fromtimestamp(signed_at + 301, tz=dt.UTC), tick=False):
        assert press(slack, value, timestamp=signed_at).status_code == 401
    with time_machine.travel(dt.datetime.fromtimestamp(signed_at + 299, tz=dt.UTC), tick=False):
        assert press(slack, value, timestamp=signed_at).status_code == 200


def test_an_unmapped_slack_user_gets_an_ephemeral_refusal(waiting, receiver, slack):
    value = buttons(slack_message_of(waiting, receiver))["approve"]["value"]

    answer = press(slack, value, user="U_STRANGER").json()

    assert answer["response_type"] == "ephemeral"
    assert "not linked to a console user" in answer["text"]
    assert status_of(waiting) == ApprovalRequest.Status.PENDING


def test_a_mapped_user_who_may_not_decide_gets_an_ephemeral_refusal(waiting, receiver, slack):
    value = buttons(slack_message_of(waiting, receiver))["approve"]["value"]

    answer = press(slack, value, user="U_DAVE").json()

    assert answer["response_type"] == "ephemeral"
    assert "Only members of approvers-write may decide write actions" in answer["text"]
    assert status_of(waiting) == ApprovalRequest.Status.PENDING


def test_a_press_replayed_after_the_decision_changes_nothing(waiting, receiver, slack, carol):
    value = buttons(slack_message_of(waiting, receiver))["approve"]["value"]
    assert press(slack, value).status_code == 200

    replay = press(slack, value).json()

    assert replay["response_type"] == "ephemeral"
    assert "Already approved by bob" in replay["text"]
    assert AuditEvent.objects.filter(action="approval.voted").count() == 1


def test_a_press_on_a_message_about_a_changed_action_decides_nothing(waiting, receiver, slack):
    value = buttons(slack_message_of(waiting, receiver))["approve"]["value"]
    ApprovalRequest.objects.filter(pk=waiting.pk).update(payload_hash="f" * 64)

    answer = press(slack, value).json()

    assert "changed since this message" in answer["text"]
    assert status_of(waiting) == ApprovalRequest.Status.PENDING


def test_a_button_value_not_signed_for_this_endpoint_decides_nothing(
    waiting, receiver, slack, alice
):
    found = buttons(slack_message_of(waiting, receiver))
    other = WebhookEndpoint.objects.create(
        name="other", url=receiver.url, kind="slack", slack_signing_secret=SECRET
    )

    answer = press(other, found["approve"]["value"]).json()
    reject_as_approve = press(slack, found["reject"]["value"], action="approve").json()

    assert "not valid" in answer["text"] and "not valid" in reject_as_approve["text"]
    assert status_of(waiting) == ApprovalRequest.Status.PENDING


def test_only_a_slack_endpoint_with_a_secret_takes_presses_and_bodies_are_bounded(
    waiting, receiver, slack
):
    value = buttons(slack_message_of(waiting, receiver))["approve"]["value"]
    url = reverse("approvals:slack-interactions", args=[slack.pk])

    huge = Client().post(url, data="payload=" + "x" * 70_000, content_type="text/plain")
    assert huge.status_code == 413
    WebhookEndpoint.objects.filter(pk=slack.pk).update(kind="standard")
    assert press(slack, value).status_code == 404
    assert Client().get(url).status_code == 405
    assert status_of(waiting) == ApprovalRequest.Status.PENDING


def test_the_answer_is_posted_only_under_the_allowed_prefixes(settings, receiver):
    settings.SLACK_RESPONSE_URL_PREFIXES = [receiver.url]
    answer = {"replace_original": True, "text": "Approved by bob at 08:03"}

    assert slack_respond(response_url=receiver.url + "actions/1", answer=answer) == "sent: 200"
    assert receiver.bodies == [answer]
    refused = slack_respond(response_url="http://127.0.0.1:9/elsewhere", answer=answer)
    assert refused.startswith("refused")
    assert receiver.bodies == [answer]


def test_a_response_url_outside_the_prefixes_is_never_queued(
    waiting, receiver, slack, queued, settings, django_capture_on_commit_callbacks
):
    settings.SLACK_RESPONSE_URL_PREFIXES = ["https://hooks.slack.com/other/"]
    value = buttons(slack_message_of(waiting, receiver))["approve"]["value"]

    with django_capture_on_commit_callbacks(execute=True):
        assert press(slack, value).status_code == 200

    assert status_of(waiting) == ApprovalRequest.Status.APPROVED
    assert tasks_named(queued, RESPOND_TASK) == []


def test_the_slack_signing_secret_is_set_in_the_admin_and_never_shown_or_audited(
    admin_client, demo_policy, bob
):
    url = "/admin/approvals/webhookendpoint/add/"
    form = {"name": "slack", "url": "https://hooks.slack.com/services/T/B/X", "is_active": "on"}

    missing = admin_client.post(url, {**form, "kind": "slack"})
    assert missing.status_code == 200 and "needs its app" in missing.content.decode()
    created = admin_client.post(url, {**form, "kind": "slack", "slack_signing_secret": SECRET})
    assert created.status_code == 302
    endpoint = WebhookEndpoint.objects.get(name="slack")
    assert (endpoint.kind, endpoint.slack_signing_secret) == ("slack", SECRET)
    change = f"/admin/approvals/webhookendpoint/{endpoint.pk}/change/"
    admin_client.post(change, {**form, "kind": "slack", "slack_signing_secret": ""})  # kept
    endpoint.refresh_from_db()
    assert endpoint.slack_signing_secret == SECRET

    for page in ("/admin/approvals/webhookendpoint/", change):
        assert SECRET not in admin_client.get(page).content.decode()
    events = AuditEvent.objects.filter(action="webhook_endpoint.changed")
    assert [e.data["state"]["kind"] for e in events] == ["slack", "slack"]
    assert not any(SECRET in e.canonical for e in events)

    mapped = admin_client.post(
        "/admin/approvals/slackidentity/add/",
        {"team_id": TEAM, "slack_user_id": "U_BOB", "user": bob.pk},
    )
    assert mapped.status_code == 302
    (event,) = AuditEvent.objects.filter(action="slack_identity.changed")
    assert event.data == {
        "change": "created",
        "team_id": TEAM,
        "slack_user_id": "U_BOB",
        "user": "bob",
    }


def test_a_quorum_vote_from_slack_counts_without_closing_the_message(
    demo_policy, alice, bob, receiver, slack
):
    RiskTier.objects.filter(name="write").update(required_approvals=2)
    approval = request_approval(requester=alice, tier="write")
    value = buttons(slack_message_of(approval, receiver))["approve"]["value"]

    answer = press(slack, value).json()

    assert answer["response_type"] == "ephemeral" and "counts" in answer["text"]
    assert status_of(approval) == ApprovalRequest.Status.PENDING
