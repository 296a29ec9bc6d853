"""Callback URLs urllib would call elsewhere than the host checked (user info, a backslash)
are refused: registered in the admin, and at delivery."""

from __future__ import annotations

from unittest import mock

import pytest

from agents.remote.models import ExternalAgent
from agents.runtime import advance
from approvals import notification_webhooks
from approvals.models import Notification, WebhookEndpoint
from approvals.notification_webhooks import same_origin, webhook_url_problem
from approvals.notifications import notification_deliver
from tests.agents.remote.helpers import open_request
from tests.support.approvals import decide
from tests.support.people import client_for

UNSAFE = [
    "https://user:secret@agent.example/hooks",
    "https://agent.example@evil.example/hooks",
    "https://evil.example\\@agent.example/hooks",
]


@pytest.mark.parametrize("url", UNSAFE)
def test_an_unsafe_url_is_never_on_any_origin(url):
    assert webhook_url_problem(url)
    assert not same_origin(url, url)
    assert not same_origin("https://agent.example/hooks", url)


@pytest.mark.parametrize("url", UNSAFE)
def test_the_admin_refuses_an_agent_callback_url_with_user_info(demo_policy, admin, url):
    answer = client_for(admin).post(
        "/admin/agents/externalagent/add/",
        {
            "name": "billing",
            "tools": "[]",
            "callback_url": url,
            "is_active": "on",
            "keys-TOTAL_FORMS": "0",
            "keys-INITIAL_FORMS": "0",
        },
    )
    assert answer.status_code == 200
    assert not ExternalAgent.objects.exists()


def test_the_admin_refuses_a_webhook_endpoint_url_with_user_info(demo_policy, admin):
    answer = client_for(admin).post(
        "/admin/approvals/webhookendpoint/add/",
        {"name": "ops", "url": "https://user:secret@hooks.example/x", "is_active": "on"},
    )
    assert answer.status_code == 200
    assert "user info" in answer.content.decode()
    assert not WebhookEndpoint.objects.exists()


def test_a_callback_is_not_delivered_to_a_registered_url_with_user_info(demo_policy, agent, bob):
    remote, [approval] = open_request(agent)
    decide(approval, bob)
    advance.run_advance(run_id=remote.run_id)
    # Written straight to the row (an old registration, or past the form).
    WebhookEndpoint.objects.filter(pk=agent.endpoint_id).update(
        url="https://user:secret@agent.example/hooks/console"
    )
    row = Notification.objects.get(event=Notification.Event.CALLBACK)
    opener = mock.MagicMock()
    with mock.patch.object(notification_webhooks, "_OPENER", opener):
        outcome = notification_deliver(notification_id=row.pk)
    opener.open.assert_not_called()
    assert "user info" in outcome
