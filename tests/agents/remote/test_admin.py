"""Registering an external agent in the admin: its service user, a key shown once, revoking
it, the callback endpoint; every change audited without its secrets."""

from __future__ import annotations

import json
import re

from django.contrib.messages import get_messages
from rest_framework.test import APIClient

from agents.remote.models import ExternalAgent, ExternalAgentKey
from approvals.models import WebhookEndpoint
from audit.models import AuditEvent
from tests.support.people import client_for


def test_an_admin_registers_an_agent_issues_a_key_and_revokes_it(demo_policy, admin):
    client = client_for(admin)
    added = client.post(
        "/admin/agents/externalagent/add/",
        {
            "name": "billing",
            "tools": '["refund_order"]',
            "callback_url": "https://agent.example/hooks",
            "is_active": "on",
            "keys-TOTAL_FORMS": "0",
            "keys-INITIAL_FORMS": "0",
        },
    )
    assert added.status_code == 302, added.content.decode()[:2000]
    agent = ExternalAgent.objects.get(name="billing")
    assert agent.user.username == "external:billing"
    assert not agent.user.has_usable_password() and not agent.user.is_staff
    assert agent.endpoint.url == "https://agent.example/hooks"
    assert agent.endpoint.secret == agent.callback_secret
    assert agent.endpoint.kind == WebhookEndpoint.Kind.STANDARD

    issued = client.post(
        "/admin/agents/externalagent/",
        {"action": "issue_key", "_selected_action": [agent.pk]},
        follow=True,
    )
    message = " ".join(str(m) for m in get_messages(issued.wsgi_request))
    key = re.search(r"agk_[A-Za-z0-9_-]{43}", message).group(0)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Agent {key}")
    assert api.get("/api/approval-requests/").status_code == 200
    row = ExternalAgentKey.objects.get(agent=agent)
    assert key not in json.dumps(list(ExternalAgentKey.objects.values()), default=str)

    client.post(
        "/admin/agents/externalagentkey/",
        {"action": "revoke", "_selected_action": [row.pk]},
    )
    assert api.get("/api/approval-requests/").status_code == 401

    changes = [e.data["change"] for e in AuditEvent.objects.filter(action="external_agent.changed")]
    assert changes == ["created", f"key {row.prefix} issued", f"key {row.prefix} revoked"]
    trail = json.dumps(list(AuditEvent.objects.values("data")), default=str)
    assert key not in trail and agent.callback_secret not in trail


def test_the_tools_must_be_a_list_of_names(demo_policy, admin):
    answer = client_for(admin).post(
        "/admin/agents/externalagent/add/",
        {"name": "x", "tools": '{"a": 1}', "keys-TOTAL_FORMS": "0", "keys-INITIAL_FORMS": "0"},
    )
    assert answer.status_code == 200
    assert "A JSON list of tool names" in answer.content.decode()
    assert not ExternalAgent.objects.exists()


def test_the_admin_pages_of_agents_and_keys_answer(demo_policy, admin, agent, agent_key):
    client = client_for(admin)
    for path in (
        "/admin/agents/externalagent/",
        f"/admin/agents/externalagent/{agent.pk}/change/",
        "/admin/agents/externalagentkey/",
    ):
        assert client.get(path).status_code == 200, path


def test_an_agents_name_cannot_change_once_registered(demo_policy, admin, agent):
    # Its runs are runs of "external:<name>": a rename would hand them to a newcomer.
    changed = client_for(admin).post(
        f"/admin/agents/externalagent/{agent.pk}/change/",
        {
            "name": "billing-v1",
            "tools": "[]",
            "callback_url": "https://agent.example/hooks/console",
            "is_active": "on",
            "keys-TOTAL_FORMS": "0",
            "keys-INITIAL_FORMS": "0",
        },
    )
    assert changed.status_code == 302, changed.content.decode()[:2000]
    agent.refresh_from_db()
    assert agent.name == "billing"
    assert agent.user.username == "external:billing"
