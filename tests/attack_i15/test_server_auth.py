"""Attacks on the agent scheme: odd Authorization headers, an agent key on people's pages and
the admin, a person's session on the agent endpoints (guards: these held)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.support.people import client_for

URL = "/api/approval-requests/"


@pytest.mark.parametrize(
    "header",
    [
        "Agent agk_" + "a" * 43 + "\x00",
        "Agent \x00",
        "Agent  agk_x",
        "Agent " + "a" * 100_000,
        "Agent agk_" + "ü" * 43,
        "Agent",
        "agent a b",
        "AGENT agk_" + "-" * 43,
    ],
    ids=["nul-after", "nul", "two-spaces", "huge", "latin1", "bare", "three-parts", "dashes"],
)
def test_an_odd_agent_header_gets_401_never_500(db, header):
    answer = APIClient().get(URL, HTTP_AUTHORIZATION=header)
    assert answer.status_code == 401


def test_an_agent_key_opens_no_page_and_no_admin(demo_policy, agent_key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {agent_key}")
    for path in ("/", "/runs/", "/audit/", "/metrics/", "/admin/"):
        answer = client.get(path)
        assert answer.status_code == 302, path  # to the login page
        assert "login" in answer["Location"]


def test_a_persons_session_is_refused_on_the_agent_endpoints(demo_policy, bob, admin):
    for who in (bob, admin):
        answer = client_for(who).get(URL)
        assert answer.status_code == 403
