"""Attacks on a request's own callback URL (SSRF): only what urllib will really call, on the
agent's registered origin."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

URL = "/api/approval-requests/"


def agent_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {key}")
    return client


@pytest.mark.parametrize(
    "callback_url",
    [
        "https://agent.example@evil.example/hooks",
        # urlsplit reads host agent.example; urllib connects to "evil.example\@agent.example".
        "https://evil.example\\@agent.example/hooks",
        # Same origin for urlsplit, but urllib cannot deliver it (InvalidURL: nonnumeric port).
        "https://user:secret@agent.example/hooks",
        "https://agent.example.evil.example/hooks",
        "http://agent.example/hooks",
        "https://agent.example:8443/hooks",
    ],
)
def test_a_callback_url_with_userinfo_or_another_origin_gets_400(
    demo_policy, agent_key, callback_url
):
    body = {
        "thread_id": "t",
        "interrupt_id": "i",
        "value": {"question": "?"},
        "callback_url": callback_url,
    }
    answer = agent_client(agent_key).post(URL, body, format="json")
    assert answer.status_code == 400, answer.content
    assert "callback_url" in answer.json()["errors"]
