"""The decision reaches the agent: a callback signed with the agent's secret (Standard
Webhooks), through the outbox (retried, then failed and visible), and by long poll."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
from unittest import mock

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient
from standardwebhooks.webhooks import Webhook

from agents.remote.api import remote_request_wait
from agents.remote.models import RemoteRequest
from agents.remote.registry import external_agent_key_issue, external_agent_save
from agents.runtime import advance
from approvals import notification_webhooks
from approvals.models import Notification
from approvals.notifications import MAX_ATTEMPTS, notification_deliver
from tests.agents.remote.conftest import make_agent
from tests.agents.remote.helpers import open_request
from tests.support.approvals import decide


class Receiver:
    """Stands in for the agent's web server: records each POST, answers ``status``."""

    def __init__(self, status: int = 200, error: Exception | None = None):
        self.status, self.error, self.requests = status, error, []

    def open(self, request, timeout):  # noqa: ANN001 - urllib's opener interface
        self.requests.append(request)
        if self.error is not None:
            raise self.error
        answer = mock.MagicMock(status=self.status)
        answer.__enter__.return_value = answer
        return answer


def deliver_all() -> list[str]:
    """Deliver every callback now (each attempt due at once: no waiting for the backoff)."""
    rows = Notification.objects.filter(event=Notification.Event.CALLBACK)
    rows.update(next_attempt_at=timezone.now())
    return [notification_deliver(notification_id=pk) for pk in rows.values_list("pk", flat=True)]


def decided(agent, bob, **open_kwargs) -> RemoteRequest:
    remote, [approval] = open_request(agent, **open_kwargs)
    decide(approval, bob, message="fine")
    advance.run_advance(run_id=remote.run_id)
    return RemoteRequest.objects.get(pk=remote.pk)


def test_the_callback_is_signed_with_the_agents_secret_and_verifies(demo_policy, agent, bob):
    remote = decided(agent, bob)
    receiver = Receiver()
    with mock.patch.object(notification_webhooks, "_OPENER", receiver):
        assert deliver_all() == ["sent"]

    [request] = receiver.requests
    assert request.full_url == agent.callback_url
    headers = {k.lower(): v for k, v in request.header_items()}
    body = Webhook(agent.callback_secret).verify(request.data.decode(), headers)
    assert body["type"] == "approval_request.decided"
    assert body["id"] == str(remote.id)
    assert body["resume"] == {"decisions": [{"type": "approve"}]}
    # Another secret does not verify it.
    with pytest.raises(Exception, match="(?i)signature"):
        Webhook(make_agent("other").callback_secret).verify(request.data.decode(), headers)


def test_a_requests_own_callback_url_on_the_agents_origin_receives_it(demo_policy, agent, bob):
    url = "https://agent.example/threads/t-1/resume"
    decided(agent, bob, callback_url=url)
    receiver = Receiver()
    with mock.patch.object(notification_webhooks, "_OPENER", receiver):
        deliver_all()
    assert receiver.requests[0].full_url == url


def test_a_callback_is_not_sent_once_the_agent_moved_to_another_origin(demo_policy, agent, bob):
    decided(agent, bob, callback_url="https://agent.example/threads/t-1/resume")
    agent.callback_url = "https://new.example/hooks"
    external_agent_save(agent=agent, actor="system:test")
    receiver = Receiver()
    with mock.patch.object(notification_webhooks, "_OPENER", receiver):
        outcome = deliver_all()
    assert receiver.requests == []
    assert "origin" in outcome[0]


def test_a_failing_callback_is_retried_then_failed_and_visible(demo_policy, agent, bob, settings):
    decided(agent, bob)
    receiver = Receiver(error=urllib.error.URLError("connection refused"))
    with mock.patch.object(notification_webhooks, "_OPENER", receiver):
        outcomes = [deliver_all()[0] for _ in range(MAX_ATTEMPTS)]
    assert outcomes[0].startswith("retry in")
    assert outcomes[-1].startswith("failed")
    row = Notification.objects.get(event=Notification.Event.CALLBACK)
    assert row.status == Notification.Status.FAILED and row.attempts == MAX_ATTEMPTS
    assert "connection refused" in row.last_error
    assert len(receiver.requests) == MAX_ATTEMPTS
    # Every attempt carries the same webhook-id: the agent can drop duplicates.
    assert len({r.get_header("Webhook-id") for r in receiver.requests}) == 1


def test_an_agent_with_no_callback_url_gets_no_callback(demo_policy, bob):
    agent = make_agent("poller", callback_url="")
    decided(agent, bob)
    assert not Notification.objects.filter(event=Notification.Event.CALLBACK).exists()


def test_a_long_poll_times_out_to_pending(demo_policy, agent):
    remote, _ = open_request(agent)
    started = time.monotonic()
    waited = remote_request_wait(remote=remote, seconds=1)
    assert waited.status == RemoteRequest.Status.PENDING
    assert time.monotonic() - started >= 1


@pytest.mark.django_db(transaction=True)
def test_a_long_poll_returns_as_soon_as_a_person_decides(alice, bob, carol, dave):
    from django.contrib.auth.models import Group

    from approvals.services import policy_seed_demo

    policy_seed_demo()
    bob.groups.add(Group.objects.get(name="approvers-write"))
    agent = make_agent()
    key = external_agent_key_issue(agent=agent, actor="system:test")[1]
    remote, [approval] = open_request(agent)

    def decide_soon() -> None:
        try:
            time.sleep(1)
            decide(approval, bob)
            advance.run_advance(run_id=remote.run_id)
        finally:
            connection.close()

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {key}")
    deciding = threading.Thread(target=decide_soon)
    started = time.monotonic()
    deciding.start()
    answer = client.get(f"/api/approval-requests/{remote.id}/", {"wait": 20})
    elapsed = time.monotonic() - started
    deciding.join()

    assert answer.status_code == 200
    assert answer.json()["status"] == "decided"
    assert answer.json()["resume"] == {"decisions": [{"type": "approve"}]}
    assert 1 <= elapsed < 10
    assert json.loads(json.dumps(answer.json()))["approvals"][0]["decision"]["by"] == "bob"
