"""Attacks on Slack's interactivity endpoint: a correctly signed body whose payload the console
cannot read is a 400, never a 500."""

from __future__ import annotations

import hashlib
import hmac
import time
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import ApprovalRequest, RiskTier, SlackIdentity, WebhookEndpoint
from approvals.services.slack import slack_respond, slack_response_url_allowed
from tests.approvals.test_slack import SECRET, TEAM, status_of
from tests.support.approvals import request_approval


@pytest.fixture
def slack(demo_policy, bob) -> WebhookEndpoint:
    """Tier "write" notifies a Slack endpoint (nothing listens); bob is a mapped Slack user."""
    endpoint = WebhookEndpoint.objects.create(
        name="slack", url="https://127.0.0.1:9/", kind="slack", slack_signing_secret=SECRET
    )
    RiskTier.objects.filter(name="write").update(webhook_endpoint=endpoint)
    SlackIdentity.objects.create(team_id=TEAM, slack_user_id="U_BOB", user=bob)
    return endpoint


@pytest.fixture
def waiting(slack, alice) -> ApprovalRequest:
    return request_approval(requester=alice, tier="write")


def signed_post(endpoint, body: str):
    ts = str(int(time.time()))
    digest = hmac.new(SECRET.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return Client(raise_request_exception=False).post(
        reverse("approvals:slack-interactions", args=[endpoint.pk]),
        data=body,
        content_type="application/x-www-form-urlencoded",
        headers={"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"},
    )


@pytest.mark.parametrize("payload", ["[" * 20000, '{"a":' * 3000, "{nope"])
def test_a_signed_payload_nested_too_deeply_or_broken_is_a_400_not_a_500(slack, waiting, payload):
    response = signed_post(slack, urlencode({"payload": payload}))

    assert response.status_code == 400
    assert response.json() == {"error": "no interaction payload"}
    assert status_of(waiting) == ApprovalRequest.Status.PENDING


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.slack.com.evil.example/actions/1",
        "https://hooks.slack.com@evil.example/actions/1",
        "https://hooks.slack.com:443@evil.example/actions/1",
        "https://hooks.slack.comevil.example/",
    ],
)
def test_a_prefix_set_without_its_slash_still_allows_no_other_host(settings, url):
    settings.SLACK_RESPONSE_URL_PREFIXES = ["https://hooks.slack.com"]

    assert slack_response_url_allowed("https://hooks.slack.com/actions/T1/2/abc")
    assert not slack_response_url_allowed(url)
    assert slack_respond(response_url=url, answer={"text": "x"}).startswith("refused")
